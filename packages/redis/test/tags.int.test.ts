import { getOrComputeWith, inFlightCount, invalidateTag, resetStats, stats } from '@stampede/core';
import { remoteKeys } from '@stampede/redis-protocol';
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
