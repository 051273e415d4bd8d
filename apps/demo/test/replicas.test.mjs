// Replica mode against the local Redis: three server processes, each with a memory L1 in front of
// Redis (a tiered cache), make one fill fleet-wide with the distributed fill lock, and an update on
// one replica reaches every replica's L1 through the invalidation bus; one herd or steady load runs
// at a time in the whole fleet (also checked on a fleet of memory caches). Uses a random key prefix
// and deletes only its own keys.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { json, SEED_ROWS, startDemo } from './app-process.mjs';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `stampede-demo-test-${randomUUID().slice(0, 8)}:`;

/** @type {import('./app-process.mjs').DemoProcess | undefined} */
let fleet;

beforeAll(async () => {
  fleet = await startDemo({
    REPLICAS: '3',
    CACHE: 'redis',
    REDIS_URL,
    REDIS_PREFIX: PREFIX,
    DB_LATENCY_MS: '100',
  });
});

afterAll(async () => {
  const result = await fleet?.stop();
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys = [];
    for await (const batch of redis.scanStream({ match: `${PREFIX}*`, count: 100 })) keys.push(...batch);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
  expect(result?.code).toBe(0);
  expect(fleet?.output()).toContain('all replicas stopped');
});

it('starts 3 replicas that know each other', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const view = await json(`${fleet.url}/api/fleet`);
  expect(view.replicas.map((/** @type {{ replica: number }} */ r) => r.replica)).toEqual([1, 2, 3]);
  expect(view.replicas.every((/** @type {{ up: boolean }} */ r) => r.up)).toBe(true);
  expect(await json(`${view.replicas[2].url}/api/bookmarks/count`)).toMatchObject({
    count: SEED_ROWS,
    replica: 3,
  });
});

it('a 300-request herd spread across the replicas makes 1 fill fleet-wide with the lock', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const urls = (await json(`${fleet.url}/api/fleet`)).replicas.map(
    (/** @type {{ url: string }} */ r) => r.url,
  );
  const fleetFills = async () => {
    const all = await Promise.all(
      urls.map(async (/** @type {string} */ url) => (await json(`${url}/actuator/metrics`)).cache.fills),
    );
    return all.reduce((a, b) => a + b, 0);
  };
  const before = await fleetFills();
  const result = await json(`${fleet.url}/api/herd?n=300&protect=1&lock=1`, { method: 'POST' });
  expect(result).toMatchObject({ n: 300, protect: true, lock: true, fills: 1, queries: 1, errors: 0 });
  expect(result.replicas.map((/** @type {{ requests: number }} */ r) => r.requests)).toEqual([100, 100, 100]);
  expect(
    result.replicas.reduce(
      (/** @type {number} */ sum, /** @type {{ fills: number }} */ r) => sum + r.fills,
      0,
    ),
  ).toBe(1);

  // The replicas' own /actuator/metrics agree: one more fill in the whole fleet.
  expect((await fleetFills()) - before).toBe(1);
});

/**
 * A steady load on replica 1, then a herd on replica 2 while it runs: the herd is refused (each
 * measures the whole fleet's counters, so they must not overlap); once the load is over the herd runs.
 * @param {string[]} urls
 */
async function oneLoadAtATime(urls) {
  const running = json(`${urls[0]}/api/steady?variant=plain&rate=50&seconds=2`, { method: 'POST' });
  running.catch(() => undefined); // awaited below; a failed check before must not leave it unhandled
  await new Promise((resolve) => setTimeout(resolve, 300));
  const herd = await fetch(`${urls[1]}/api/herd?n=30`, { method: 'POST' });
  expect(herd.status).toBe(409);
  expect((await herd.json()).error).toBe(
    'a steady load is already running on replica 1; try again when it is done',
  );
  const steady = await fetch(`${urls[2] ?? urls[1]}/api/steady?seconds=1`, { method: 'POST' });
  expect(steady.status).toBe(409);
  const result = await running;
  expect(result).toMatchObject({ n: 100, errors: 0 });
  // The load's own numbers: its 100 requests, none of a herd's.
  expect(result.cache.hits + result.cache.misses + result.cache.staleHits).toBe(100);
  const after = await json(`${urls[1]}/api/herd?n=30`, { method: 'POST' });
  expect(after).toMatchObject({ n: 30, errors: 0 });
}

it('one herd or steady load at a time in the whole fleet, whichever replica each is sent to', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const urls = (await json(`${fleet.url}/api/fleet`)).replicas.map(
    (/** @type {{ url: string }} */ r) => r.url,
  );
  await oneLoadAtATime(urls);
});

it('the same with replicas on memory caches (no Redis): the supervisor keeps the one slot', async () => {
  const memory = await startDemo({ REPLICAS: '2', CACHE: 'memory', DB_LATENCY_MS: '20' });
  try {
    const urls = (await json(`${memory.url}/api/fleet`)).replicas.map(
      (/** @type {{ url: string }} */ r) => r.url,
    );
    expect(urls).toHaveLength(2);
    await oneLoadAtATime(urls);
  } finally {
    expect((await memory.stop()).code).toBe(0);
  }
});

it('each replica exports Prometheus metrics labelled with its id', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const view = await json(`${fleet.url}/api/fleet`);
  const text = await (await fetch(`${view.replicas[1].url}/actuator/prometheus`)).text();
  expect(text).toMatch(/^stampede_fills_total\{cache="tiered",replica="2"\} \d+$/m);
  expect(text).toMatch(/^stampede_l1_hits_total\{cache="tiered",replica="2"\} \d+$/m);
  expect(text).not.toContain('bookmark');
});

it('"update" on one replica: every replica serves the new count', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const urls = (await json(`${fleet.url}/api/fleet`)).replicas.map(
    (/** @type {{ url: string }} */ r) => r.url,
  );
  // Every replica holds the current count first (so a stale copy could be served).
  const before = await Promise.all(
    urls.map(async (/** @type {string} */ url) => (await json(`${url}/api/bookmarks/count`)).count),
  );
  expect(new Set(before).size).toBe(1);
  // ...from its L1: a second read is an L1 hit, no Redis command.
  const metricsOf = () =>
    Promise.all(urls.map(async (/** @type {string} */ url) => (await json(`${url}/actuator/metrics`)).cache));
  const warm = await metricsOf();
  for (const url of urls) await json(`${url}/api/bookmarks/count`);
  const hit = await metricsOf();
  expect(hit.map((m, i) => m.l1Hits - (warm[i]?.l1Hits ?? 0))).toEqual([1, 1, 1]);
  expect(hit.map((m, i) => m.l2Hits - (warm[i]?.l2Hits ?? 0))).toEqual([0, 0, 0]);

  const result = await json(`${urls[1]}/api/update`, { method: 'POST' });
  expect(result.count).toBe(before[0] + 1);
  expect(result.allServeNewCount).toBe(true);
  expect(result.replicas.map((/** @type {{ replica: number }} */ r) => r.replica)).toEqual([1, 2, 3]);
  // Checked independently of the endpoint's own report: each replica, asked directly, serves it.
  for (const url of urls) {
    expect(await json(`${url}/api/bookmarks/count`)).toMatchObject({ count: before[0] + 1 });
  }
  // The other replicas dropped their L1 copy because the bus told them to.
  const after = await metricsOf();
  for (const i of [0, 2]) {
    expect(
      (after[i]?.busEvictions ?? 0) - (hit[i]?.busEvictions ?? 0),
      `replica ${i + 1}`,
    ).toBeGreaterThanOrEqual(1);
  }
});

it('the outage switch reaches every replica; with fail-safe and the lock, the fleet tries the database once per throttle', async () => {
  if (fleet === undefined) throw new Error('set-up failed');
  const view = await json(`${fleet.url}/api/fleet`);
  const post = (/** @type {string} */ path) => json(`${fleet?.url}${path}`, { method: 'POST' });
  try {
    await post('/api/steady?variant=plain&rate=60&seconds=1'); // a good count on every replica
    await post('/api/outage?mode=error');
    const outages = (await json(`${fleet.url}/api/fleet`)).replicas.map(
      (/** @type {{ metrics: { db: { outage: string } } }} */ r) => r.metrics.db.outage,
    );
    expect(outages).toEqual(['error', 'error', 'error']);
    const response = await fetch(`${view.replicas[2].url}/api/bookmarks/count?protect=0`);
    expect(response.status).toBe(500);

    // 6 s across 3 replicas with a 5 s throttle, re-armed in Redis for the whole fleet by the
    // warm-up read: at most 1 more attempt fleet-wide, and every request answered.
    const result = await post('/api/steady?variant=plain&rate=60&seconds=6&failsafe=1&lock=1');
    expect(result).toMatchObject({ n: 360, errors: 0 });
    expect(result.queries).toBeLessThanOrEqual(1);
  } finally {
    await json(`${fleet.url}/api/outage?mode=off`, { method: 'POST' });
  }
});
