import { createHash } from 'node:crypto';
import {
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidateTag,
  resetStats,
  setValue,
  stats,
} from '@stampede/core';
import { remoteKeys, TIME_SCRIPT } from '@stampede/redis-protocol';
import {
  type RedisServer,
  randomPrefix,
  startRedisServer,
  testRedis,
  type Worker,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix, startReplicas, stopWorkers } from './helpers.js';

// Three replica processes (each its own core and connection) and this process on one prefix.
const REPLICAS = 3;
const prefix = randomPrefix('redis-tags');
let workers: Worker[] = [];
let url: string;
let client: Redis;
let cache: RedisCache;

interface Value {
  gen: string;
  by: number;
}

function ask<R>(worker: Worker, command: Record<string, unknown>, timeoutMs = 20_000): Promise<R> {
  const id = `${String(command.cmd)}-${Math.random().toString(36).slice(2)}`;
  worker.send({ ...command, id });
  return worker.next<R & { id: string }>((report) => report.id === id, timeoutMs);
}

function readAll(keys: string[], options: object, gen: string, fillMs = 0): Promise<{ values: Value[] }[]> {
  return Promise.all(
    workers.map((worker) => ask<{ values: Value[] }>(worker, { cmd: 'read', keys, options, gen, fillMs })),
  );
}

beforeAll(async () => {
  url = (await testRedis()).url;
  client = new Redis(url);
  cache = createRedisCache({ client, prefix });
  workers = await startReplicas(REPLICAS, { url, prefix });
});

afterAll(async () => {
  await stopWorkers(workers);
  await cache.close();
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe(`invalidateTag across ${REPLICAS} replica processes`, () => {
  it('after invalidateTag resolves on one replica, no replica serves an entry that carried the tag', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `page-${i}`);
    const options = { ttl: 60_000, staleWhileRevalidate: 60_000, tags: ['product:7'] };
    const before = await readAll(keys, options, 'old');
    expect(before.flatMap((report) => report.values.map((value) => value.gen))).toEqual(
      Array(REPLICAS * keys.length).fill('old'),
    );
    const [first] = workers;
    if (first === undefined) throw new Error('no worker');
    const done = await ask<{ done: boolean; error?: string }>(first, { cmd: 'tag', tags: ['product:7'] });
    expect(done).toMatchObject({ done: true });
    const after = await readAll(keys, options, 'new');
    expect(after.flatMap((report) => report.values.map((value) => value.gen))).toEqual(
      Array(REPLICAS * keys.length).fill('new'),
    );
  });

  it('a fill in flight on another replica at the invalidation is delivered there but never served afterwards', async () => {
    const [filler, invalidator, reader] = workers;
    if (filler === undefined || invalidator === undefined || reader === undefined)
      throw new Error('no worker');
    const options = { ttl: 60_000, tags: ['inflight'] };
    filler.send({ cmd: 'read', id: 'slow-read', keys: ['slow'], options, gen: 'old', fillMs: 600 });
    await filler.next<{ event?: string; key?: string }>(
      (report) => report.event === 'fill-start' && report.key === 'slow',
    );
    expect(await ask(invalidator, { cmd: 'tag', tags: ['inflight'] })).toMatchObject({ done: true });
    // Its fill started before the invalidation: its own callers still get it, and it writes...
    const slow = await filler.next<{ id?: string; values: Value[] }>((report) => report.id === 'slow-read');
    expect(slow.values[0]?.gen).toBe('old');
    // (The write lands after its callers have the value; a read meanwhile would join the fill.)
    await waitFor(async () => (await client.exists(remoteKeys(prefix, 'slow').value)) === 1, {
      message: "the slow fill's write to land",
    });
    // ...but no replica reads that write back.
    const later = await Promise.all(
      [reader, invalidator, filler].map((worker) =>
        ask<{ values: Value[] }>(worker, { cmd: 'read', keys: ['slow'], options, gen: 'new' }),
      ),
    );
    expect(later.map((report) => report.values[0]?.gen)).toEqual(['new', 'new', 'new']);
  });
});

describe('tagged reads on one Redis', () => {
  it('a tagged hit costs one round trip (one EVALSHA), however many tags the entry carries', async () => {
    const tags = ['a', 'b', 'c'];
    await getOrComputeWith(cache, 'three-tags', { ttl: 60_000, tags }, () => 'v');
    // Warm: the scripts are known, the server clock measured and the write landed.
    await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
    await cache.get('three-tags');
    const calls = ['get', 'evalsha', 'eval', 'mget', 'sendCommand'].map((method) =>
      vi.spyOn(client, method as 'get'),
    );
    resetStats();
    expect(await getOrComputeWith(cache, 'three-tags', { ttl: 60_000, tags }, () => 'other')).toBe('v');
    const sent = calls.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
    for (const spy of calls) spy.mockRestore();
    expect(stats()).toMatchObject({ hits: 1, misses: 0 });
    // One read; a clock re-measurement (its own EVALSHA, off the critical path) may join it.
    expect(sent === 1 || sent === 2).toBe(true);
  });

  it('tag keys are one small key per tag, whatever the number of entries carrying it', async () => {
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        getOrComputeWith(cache, `bulk-${i}`, { ttl: 60_000, tags: ['bulk'] }, () => i),
      ),
    );
    await invalidateTag(cache, 'bulk');
    const tagKeys = await client.keys(`${prefix}*:tag`);
    expect(tagKeys.filter((key) => key.includes('{bulk}'))).toEqual([`${prefix}{bulk}:tag`]);
    expect(Number(await client.get(`${prefix}{bulk}:tag`))).toBeGreaterThan(0);
    const again = await getOrComputeWith(cache, 'bulk-7', { ttl: 60_000, tags: ['bulk'] }, () => 'refilled');
    expect(again).toBe('refilled');
  });
});

describe('a replica whose first clock measurement was slow', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('never serves an entry it filled before a tag invalidation, however far off its estimate', async () => {
    // Redis holds every script that may write for 200 ms (as a failover or a busy server would):
    // the new replica's first TIME is read at the end of a ~200 ms round trip, so the middle of
    // that round trip, its estimate, is ~100 ms ahead of Redis's clock. Its fill then starts and
    // commits, and the tag is invalidated a few ms later on Redis's clock.
    const admin = new Redis(server.url);
    const own = randomPrefix('slow-clock');
    await admin.call('CLIENT', 'PAUSE', '200', 'WRITE');
    const fresh = createRedisCache({ client: new Redis(server.url), prefix: own });
    const steady = createRedisCache({ client: new Redis(server.url), prefix: own });
    try {
      const options = { ttl: 60_000, tags: ['slow'] };
      expect(await getOrComputeWith(fresh, 'page', options, () => 'old')).toBe('old');
      await vi.waitFor(() => expect(inFlightCount(fresh)).toBe(0));
      expect(await steady.get('page')).toMatchObject({ value: 'old' });
      await invalidateTag(steady, 'slow');
      // The fill started before the invalidation on Redis's clock: nobody reads it back.
      expect(await fresh.get('page')).toBeUndefined();
      expect(await getOrComputeWith(steady, 'page', options, () => 'new')).toBe('new');
    } finally {
      await fresh.close();
      await steady.close();
      admin.disconnect();
    }
  });
});

describe('setValue and invalidateTag, ordered on Redis whatever the writers estimate of its clock', () => {
  // A client whose clock script (TIME) answers `skew` ms off, so its cache's estimate of Redis's
  // clock is that far off: what a measurement whose request was slow and whose reply fast leaves
  // (the estimate, the middle of the round trip, runs ahead of Redis by up to half of it). 50 ms,
  // so that the outcome does not hang on this machine's timing.
  const timeSha = createHash('sha1').update(TIME_SCRIPT.source).digest('hex');
  function skewedCache(skew: number, name: string): RedisCache {
    const skewed = new Redis(url);
    const evalsha = skewed.evalsha.bind(skewed) as (...args: unknown[]) => Promise<unknown>;
    const evaluate = skewed.eval.bind(skewed) as (...args: unknown[]) => Promise<unknown>;
    Object.assign(skewed, {
      evalsha: async (...args: unknown[]) => {
        const reply = await evalsha(...args);
        return args[0] === timeSha ? Number(reply) + skew : reply;
      },
      eval: async (...args: unknown[]) => {
        const reply = await evaluate(...args);
        return args[0] === TIME_SCRIPT.source ? Number(reply) + skew : reply;
      },
    });
    const made = createRedisCache({ client: skewed, prefix, name });
    closers.push(async () => {
      await made.close();
      skewed.disconnect();
    });
    return made;
  }
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(closers.map((close) => close()));
  });
  const serverNow = async (): Promise<number> => {
    const [seconds, micros] = await client.time();
    return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  };

  it('a setValue that resolved before invalidateTag was called is served by no replica after it, though its writer runs 50 ms ahead', async () => {
    const writer = skewedCache(50, 'tags-ahead');
    await getValue(writer, 'warm');
    for (let n = 0; n < 10; n++) {
      await setValue(writer, `ahead-${n}`, 'old', { ttl: 60_000, tags: [`ahead-${n}`] });
      // Another replica (here, this process's cache) invalidates...
      await invalidateTag(cache, `ahead-${n}`);
      expect(await getValue(cache, `ahead-${n}`)).toBeUndefined();
      expect(await getValue(writer, `ahead-${n}`)).toBeUndefined();
    }
    // ...and so does the writer itself.
    await setValue(writer, 'ahead-self', 'old', { ttl: 60_000, tags: ['ahead-self'] });
    await invalidateTag(writer, 'ahead-self');
    expect(await getValue(writer, 'ahead-self')).toBeUndefined();
    // Every replica process too.
    const after = await readAll(['ahead-0'], { ttl: 60_000, tags: ['ahead-0'] }, 'new');
    expect(after.map((report) => report.values[0]?.gen)).toEqual(Array(REPLICAS).fill('new'));
  });

  it('a setValue made after invalidateTag resolved is served, though its writer runs 50 ms behind', async () => {
    const writer = skewedCache(-50, 'tags-behind');
    await getValue(writer, 'warm');
    await invalidateTag(cache, 'behind');
    await setValue(writer, 'behind', 'new', { ttl: 60_000, tags: ['behind'] });
    expect(await getValue(cache, 'behind')).toBe('new');
    expect(await getValue(writer, 'behind')).toBe('new');
  });

  it('invalidateTag then setValue in one millisecond of Redis: the value is served; invalidating again hides it', async () => {
    // Back to back on one connection, most pairs land in one millisecond of Redis's clock.
    for (let n = 0; n < 30; n++) {
      await invalidateTag(cache, `same-ms-${n}`);
      await setValue(cache, `same-ms-${n}`, 'set after', { ttl: 60_000, tags: [`same-ms-${n}`] });
      expect(await getValue(cache, `same-ms-${n}`)).toBe('set after');
      await invalidateTag(cache, `same-ms-${n}`);
      expect(await getValue(cache, `same-ms-${n}`)).toBeUndefined();
    }
    // Certainly in one millisecond: the tag recorded past Redis's clock, as an invalidation of the
    // write's millisecond (or one by a replica refused TIME) leaves it; 500 ms past, as a loaded
    // machine may take more than a few ms to send the write. The entry carries a second tag, and
    // invalidating that one hides it too.
    await client.set(`${prefix}{tie}:tag`, String((await serverNow()) + 500));
    await setValue(cache, 'tie', 'set after', { ttl: 60_000, tags: ['tie', 'tie-other'] });
    expect(await getValue(cache, 'tie')).toBe('set after');
    await invalidateTag(cache, 'tie-other');
    expect(await getValue(cache, 'tie')).toBeUndefined();
  });
});
