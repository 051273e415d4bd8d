import { type BackendErrorEvent, type FillLock, onStampedeEvent } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// What the conformance suite's `checksArguments` cases (conformance.int.test.ts) cannot see of the
// Redis cache's refusals: a lock attempt on a separate lock connection, whose read goes out apart
// and would report a bad key as a read fault, and a lock's `extend`, whose TTL Redis holds (PTTL).
// The kit's messages are asserted in core's cache-arguments.test.ts.

const prefix = randomPrefix('bad-arguments');
let client: Redis;
let lockClient: Redis;
/** Locks with the values. */
let cache: RedisCache;
/** Locks on another connection (the lock-and-read step is two calls). */
let apart: RedisCache;
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

/** Every key under the prefix. */
const stored = async (): Promise<string[]> => (await client.keys(`${prefix}*`)).sort();

beforeAll(async () => {
  const { url } = await testRedis();
  client = new Redis(url);
  lockClient = new Redis(url);
  cache = createRedisCache({ client, prefix, name: 'bad-arguments' });
  apart = createRedisCache({ client, lockClient, prefix, name: 'bad-arguments-apart' });
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
beforeEach(() => {
  events = [];
});
afterEach(async () => {
  await deletePrefix(client, prefix);
});
afterAll(async () => {
  stopListening();
  await cache.close();
  await apart.close();
  await deletePrefix(client, prefix);
  client.disconnect();
  lockClient.disconnect();
  await (await testRedis()).stop();
});

describe('tryAcquireFillLockAndRead (locks on another connection)', () => {
  it.each([
    ['a number key', [7, 1000], TypeError, /\bkey\b/],
    ['an empty key', ['', 1000], TypeError, /\bkey\b/],
    ['a zero ttl', ['k', 0], RangeError, /\bttl\b/],
    ['a NaN ttl', ['k', Number.NaN], RangeError, /\bttl\b/],
  ] as const)('rejects %s before the read, reporting no read fault', async (_, args, type, names) => {
    const attempt = (apart.tryAcquireFillLockAndRead as (...args: unknown[]) => Promise<unknown>)(...args);
    await expect(attempt).rejects.toThrow(type);
    await expect(attempt).rejects.toThrow(names);
    expect(events).toEqual([]);
    expect(await stored()).toEqual([]);
    // A good attempt still takes the lock, on the lock connection.
    const { lock } = (await apart.tryAcquireFillLockAndRead?.('k', 5_000)) ?? {};
    expect(await lockClient.exists(`${prefix}{k}:lock`)).toBe(1);
    await lock?.release('failed');
    expect(events).toEqual([]);
  });
});

describe("a lock's extend", () => {
  it.each([
    ['a NaN ttl', Number.NaN, RangeError],
    ['a zero ttl', 0, RangeError],
    ['a string ttl', '5s', TypeError],
  ] as const)("rejects %s and leaves the lock's PTTL as it was", async (_, ttl, type) => {
    const lock = (await cache.tryAcquireFillLock?.('extended', 5_000)) as FillLock;
    const lockKey = `${prefix}{extended}:lock`;
    const before = await client.pttl(lockKey);
    await expect((lock.extend as (ttl: unknown) => Promise<boolean>)(ttl)).rejects.toThrow(type);
    // Not shortened (0 or NaN used to end the lock at once or fail in the script).
    expect(await client.pttl(lockKey)).toBeGreaterThan(before - 1_000);
    expect(await lock.extend?.(10_000)).toBe(true);
    expect(await client.pttl(lockKey)).toBeGreaterThan(5_000);
    await lock.release('failed');
  });
});
