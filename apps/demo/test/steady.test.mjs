// The steady load over HTTP (memory cache, SQLite): a constant rate through several 2 s expiries,
// every request's latency returned; with a TTL only readers wait at each expiry, with
// stale-while-revalidate or early refresh none does.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { json, startDemo } from './app-process.mjs';

/** @type {import('./app-process.mjs').DemoProcess} */
let demo;

beforeAll(async () => {
  demo = await startDemo({ DB_LATENCY_MS: '100' });
});

afterAll(async () => {
  expect((await demo.stop()).code).toBe(0);
});

const post = (/** @type {string} */ path) => json(`${demo.url}${path}`, { method: 'POST' });

it('TTL only: each expiry inside the run makes readers wait for a fill', async () => {
  const result = await post('/api/steady?variant=plain&rate=100&seconds=5');
  expect(result).toMatchObject({ variant: 'plain', rate: 100, seconds: 5, n: 500, errors: 0 });
  expect(result.samples).toHaveLength(500);
  for (const [at, ms, ok] of result.samples) {
    expect(at).toBeGreaterThanOrEqual(0);
    expect(ms).toBeGreaterThan(0);
    expect(ok).toBe(1);
  }
  // Started warm with a 2 s TTL: expiries near 2 s and 4 s, each refilled by one fill that readers wait for.
  expect(result.cache.fills).toBeGreaterThanOrEqual(2);
  expect(result.cache.misses).toBeGreaterThan(result.cache.fills);
  expect(result.slow).toBeGreaterThan(0);
  expect(result.max).toBeGreaterThanOrEqual(50);
  expect(result.cache.backgroundRefreshes).toBe(0);
});

it('stale-while-revalidate: the same load, refreshed in the background, nobody waits for a fill', async () => {
  const result = await post('/api/steady?variant=swr&rate=100&seconds=5');
  expect(result).toMatchObject({ variant: 'swr', n: 500, errors: 0 });
  expect(result.cache.misses).toBe(0);
  expect(result.cache.backgroundRefreshes).toBeGreaterThanOrEqual(2);
  expect(result.cache.staleHits).toBeGreaterThan(0);
});

it('early refresh: the count is refreshed before it expires, every read a fresh hit', async () => {
  // 200/s, so reads come every 5 ms: a refresh started less than 75 ms ahead of an expiry (the only
  // way a reader could wait) has a probability of about 6e-5 per expiry with XFetch's beta 1.
  const result = await post('/api/steady?variant=early&rate=200&seconds=5');
  expect(result).toMatchObject({ variant: 'early', n: 1000, errors: 0 });
  expect(result.cache.earlyRefreshes).toBeGreaterThanOrEqual(2);
  expect(result.cache.backgroundRefreshes).toBe(0);
  expect(result.cache.staleHits).toBe(0);
  expect(result.cache.misses).toBeLessThan(5);
  expect(result.cache.hits).toBeGreaterThan(995);
});

it('refuses bad parameters and a second load while one runs', async () => {
  for (const query of ['variant=nope', 'rate=0', 'rate=1001', 'seconds=0', 'seconds=31', 'failsafe=2']) {
    const response = await fetch(`${demo.url}/api/steady?${query}`, { method: 'POST' });
    expect(response.status, query).toBe(400);
    expect((await response.json()).error).toBeTypeOf('string');
  }
  const running = post('/api/steady?variant=plain&rate=10&seconds=2');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const second = await fetch(`${demo.url}/api/herd?n=10`, { method: 'POST' });
  expect(second.status).toBe(409);
  expect((await running).n).toBe(20);
});
