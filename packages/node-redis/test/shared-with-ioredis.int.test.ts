import { getOrComputeWith, getValue, invalidate, setValue } from '@stampede/core';
import { createRedisCache } from '@stampede/redis';
import { deletePrefix, randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeRedisCache } from '../src/index.js';
import { connectedClient } from './helpers.js';

// A node-redis cache and a @stampede/redis (ioredis) cache given the same prefix on the same
// database share entries, tombstones, the lock and its announcements.

const runPrefix = randomPrefix('node-redis-shared');
let count = 0;
let ioredis: Redis;
let client: Awaited<ReturnType<typeof connectedClient>>;
const closers: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  ioredis = new Redis((await testRedis()).url);
  client = await connectedClient();
});
afterAll(async () => {
  await Promise.all(closers.map((cache) => cache.close()));
  await deletePrefix(ioredis, runPrefix);
  ioredis.disconnect();
  client.destroy();
});

function pair() {
  const prefix = `${runPrefix}${++count}:`;
  const pairOf = [
    createNodeRedisCache({ client, prefix }),
    createRedisCache({ client: ioredis, prefix }),
  ] as const;
  closers.push(...pairOf);
  return pairOf;
}

describe('a node-redis and an ioredis cache with one prefix', () => {
  it("read each other's entries", async () => {
    const [nodeRedis, redis] = pair();
    await setValue(nodeRedis, 'a', { from: 'node-redis' }, { ttl: 60_000 });
    await setValue(redis, 'b', { from: 'ioredis' }, { ttl: 60_000 });
    expect(await getValue(redis, 'a')).toEqual({ from: 'node-redis' });
    expect(await getValue(nodeRedis, 'b')).toEqual({ from: 'ioredis' });
    // Byte for byte: the same key name holds the same envelope.
    expect(await ioredis.get(`${nodeRedis.prefix}{a}`)).toBe(await client.get(`${redis.prefix}{a}`));
  });

  it("honour each other's tombstones", async () => {
    const [nodeRedis, redis] = pair();
    await setValue(redis, 'k', 'v', { ttl: 60_000 });
    await invalidate(nodeRedis, 'k');
    expect(await getValue(redis, 'k')).toBeUndefined();
    // A fill that started before the delete cannot bring the value back through the other client.
    const before = Date.now() - 1_000;
    const older = {
      value: 'older',
      createdAt: before,
      freshUntil: before + 60_000,
      staleUntil: before + 60_000,
    };
    await redis.set('k', older, { ttl: 60_000 });
    expect(await getValue(nodeRedis, 'k')).toBeUndefined();
    await setValue(nodeRedis, 'j', 'v', { ttl: 60_000 });
    await invalidate(redis, 'j');
    await nodeRedis.set('j', older, { ttl: 60_000 });
    expect(await getValue(redis, 'j')).toBeUndefined();
  });

  it('contend for one lock, and survive a SCRIPT FLUSH (NOSCRIPT falls back to EVAL)', async () => {
    const [nodeRedis, redis] = pair();
    const held = await redis.tryAcquireFillLock?.('k', 5_000);
    expect(held).toBeDefined();
    expect(await nodeRedis.tryAcquireFillLock?.('k', 5_000)).toBeUndefined();
    await held?.release('filled');
    const next = await nodeRedis.tryAcquireFillLock?.('k', 5_000);
    expect(next).toBeDefined();
    expect(await redis.tryAcquireFillLock?.('k', 5_000)).toBeUndefined();
    await client.scriptFlush();
    expect(await next?.extend?.(5_000)).toBe(true);
    await next?.release('filled');
    expect(await redis.tryAcquireFillLock?.('k', 5_000)).toBeDefined();
  });

  it("wakes a node-redis lock loser on the ioredis holder's announcement, well before its poll", async () => {
    const [nodeRedis, redis] = pair();
    const held = await redis.tryAcquireFillLock?.('hot', 10_000);
    expect(held).toBeDefined();
    const woken = new Promise<string>((resolve) => {
      const stop = nodeRedis.onFillDone('hot', (outcome) => {
        stop();
        resolve(outcome);
      });
    });
    const started = Date.now();
    // The loser polls every 2 s at most; a push answers within a round trip of the announcement.
    const waiting = getOrComputeWith(
      nodeRedis,
      'hot',
      { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000, lockPollInterval: 2_000 },
      () => 'loser filled',
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await setValue(redis, 'hot', 'holder filled', { ttl: 60_000 });
    await held?.release('filled');
    expect(await woken).toBe('filled');
    expect(await waiting).toBe('holder filled');
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
