import { onStampedeEvent, type WarningEvent } from '@stampede/core';
import {
  freePort,
  randomPrefix,
  readsTimingOut,
  spawnRedisServer,
  testRedis,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// A value whose read takes longer than operationTimeout: 20 MB, read with a 5 ms time-out (a 20 MB
// GET takes tens of ms even over loopback; under 5 ms it would need 4 GB/s). Such a read is a miss
// every time.
const prefix = randomPrefix('large-values');
const BIG = 'x'.repeat(20 * 1_048_576);
let client: Redis;
let writer: RedisCache;
const warnings: WarningEvent[] = [];
let stopListening: () => void = () => {};
const caches: RedisCache[] = [];

beforeAll(async () => {
  client = new Redis((await testRedis()).url);
  // Writes with the default time-out, so the big value lands.
  writer = createRedisCache({ client, prefix, name: 'large-writer' });
  caches.push(writer);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'warning') warnings.push(event);
  });
});

afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

const entry = (value: unknown) => ({
  value,
  createdAt: Date.now(),
  freshUntil: Infinity,
  staleUntil: Infinity,
});

function reader(name: string): RedisCache {
  const cache = createRedisCache({ client, prefix, name, operationTimeout: 5 });
  caches.push(cache);
  return cache;
}

/** A read of `key` that times out, and the moment its late answer has arrived. */
async function lateRead(cache: RedisCache, key: string): Promise<void> {
  await expect(cache.get(key)).rejects.toMatchObject({ code: 'E_STAMPEDE_BACKEND_TIMEOUT', key });
  // The answer still comes: a PING sent after it on the same connection answers after it. The read
  // (a script run: EVALSHA, since tags) hands its late answer on through a few more promises than
  // the PING does: one macrotask lets them settle.
  await client.ping();
  await new Promise((resolve) => setImmediate(resolve));
}

const warningsOf = (name: string) => warnings.filter((warning) => warning.cache === name);

describe('a value too large to read within operationTimeout', () => {
  it('after 3 late reads of one key in a row: one warning naming the key, its size and the read time', async () => {
    await writer.set('big', entry(BIG), { ttl: 60_000 });
    const cache = reader('large-reader');
    await lateRead(cache, 'big');
    await lateRead(cache, 'big');
    expect(warningsOf('large-reader')).toEqual([]);
    await lateRead(cache, 'big');
    const found = warningsOf('large-reader');
    expect(found).toHaveLength(1);
    expect(found[0]?.message).toMatch(/3 reads in a row of 'big'/);
    expect(found[0]?.message).toMatch(/operationTimeout \(5 ms; the last took \d+ ms for 20\.0 MB\)/);
    expect(found[0]?.message).toMatch(/recomputed on every call/);
    // Once per cache.
    await lateRead(cache, 'big');
    await lateRead(cache, 'big');
    await lateRead(cache, 'big');
    expect(warningsOf('large-reader')).toHaveLength(1);
  });

  it('late reads of other keys in between neither end a streak nor add to it', async () => {
    await writer.set('big-a', entry(BIG), { ttl: 60_000 });
    await writer.set('big-b', entry(BIG), { ttl: 60_000 });
    const cache = reader('large-streaks');
    // Two late reads each: no key has three yet. (A read in time ending a streak is a unit test:
    // redis-protocol/test/production.test.ts.)
    for (const key of ['big-a', 'big-b', 'big-a', 'big-b']) await lateRead(cache, key);
    expect(warningsOf('large-streaks')).toEqual([]);
    await lateRead(cache, 'big-a');
    expect(warningsOf('large-streaks')).toHaveLength(1);
    expect(warningsOf('large-streaks')[0]?.message).toMatch(/'big-a'/);
  });
});

describe('reads that waited out an outage', () => {
  it('do not count as slow reads: no warning blames the value', async () => {
    // A server of this test's own, stopped while reads are sent: they wait in ioredis's offline
    // queue and answer after operationTimeout once it is back. Their lateness is the outage's.
    const port = await freePort();
    let server = await spawnRedisServer(port);
    const own = new Redis(server.url, { retryStrategy: () => 20 });
    own.on('error', () => {});
    const cache = createRedisCache({ client: own, prefix, name: 'outage-reader', operationTimeout: 20 });
    caches.push(cache);
    try {
      await cache.set('small', entry('v'), { ttl: 60_000 });
      await server.stop();
      await waitFor(() => own.status !== 'ready');
      const lateAnswers = await readsTimingOut(() => cache.get('small'), 4);
      server = await spawnRedisServer(port);
      await waitFor(() => own.status === 'ready', { timeout: 10_000 });
      // Every queued read has had its late answer.
      await own.ping();
      await new Promise((resolve) => setImmediate(resolve));
      await lateAnswers;
      expect(warningsOf('outage-reader')).toEqual([]);
    } finally {
      own.disconnect();
      await server.stop();
    }
  });
});
