import {
  type CacheFillError,
  getOrComputeWith,
  invalidate,
  onStampedeEvent,
  type StampedeEvent,
} from '@stampede/core';
import { decodeEnvelope } from '@stampede/core/adapter';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// Two caches on one prefix, each with its own connection: two replicas of one service. The first
// one's database goes down; fail-safe re-arms the last value in Redis, and the second one hits it.

const prefix = randomPrefix('fail-safe');
const clients: Redis[] = [];
let a: RedisCache;
let b: RedisCache;
const events: StampedeEvent[] = [];
let stopListening: () => void;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TTL = 150;
const THROTTLE = 5_000;
const MAX_STALE = 60_000;
const options = {
  ttl: TTL,
  failSafe: { maxStale: MAX_STALE, throttle: THROTTLE },
  distributedFillLock: true,
  lockWaitTimeout: 5_000,
} as const;

beforeAll(async () => {
  const { url } = await testRedis();
  for (let i = 0; i < 3; i++) clients.push(new Redis(url));
  a = createRedisCache({ client: clients[0] as Redis, prefix, name: 'fail-safe-a' });
  b = createRedisCache({ client: clients[1] as Redis, prefix, name: 'fail-safe-b' });
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'fail-safe') events.push(event);
  });
});
afterAll(async () => {
  stopListening();
  await a.close();
  await b.close();
  await deletePrefix(clients[2] as Redis, prefix);
  for (const client of clients) client.disconnect();
});

/** The entry Redis holds for `key`, decoded (times on Redis's clock), and its PTTL. */
async function stored(key: string) {
  const admin = clients[2] as Redis;
  const valueKey = redisKeys(prefix, key).value;
  const [text, pttl] = await Promise.all([admin.get(valueKey), admin.pttl(valueKey)]);
  return { entry: text === null || text.startsWith('t|') ? undefined : decodeEnvelope(text), text, pttl };
}

const down = () =>
  vi.fn(async (): Promise<string> => {
    throw new Error('database down');
  });

describe('fail-safe on Redis', () => {
  it('keeps the entry for ttl + maxStale; a failing fill re-arms it in Redis and the other replica hits it', async () => {
    expect(await getOrComputeWith(a, 'count', options, () => 'v1')).toBe('v1');
    const first = await stored('count');
    expect(first.pttl).toBeGreaterThan(MAX_STALE - 1_000);
    expect(first.pttl).toBeLessThanOrEqual(TTL + MAX_STALE);
    await sleep(TTL + 50);

    const fillA = down();
    expect(await getOrComputeWith(a, 'count', options, fillA)).toBe('v1');
    expect(fillA).toHaveBeenCalledTimes(1);
    expect(events.filter((e) => e.type === 'fail-safe' && e.key === 'count')).toHaveLength(1);
    // The re-arm is written in the background: the caller had the value without waiting for it.
    const rearmed = await vi.waitFor(async () => {
      const now = await stored('count');
      // Fresh again for the throttle (Redis's clock; a second of slack for the round trips).
      expect(now.entry?.freshUntil).toBeGreaterThan((first.entry?.freshUntil ?? 0) + THROTTLE - 1_000);
      return now;
    });
    expect(rearmed.entry?.value).toBe('v1');
    expect(rearmed.entry?.createdAt).toBe(first.entry?.createdAt);

    // The other replica: a hit on the re-armed value, no fill tried on the failing database.
    const fillB = down();
    expect(await getOrComputeWith(b, 'count', options, fillB)).toBe('v1');
    expect(fillB).not.toHaveBeenCalled();
  });

  it('with the lock, the replica waiting for the failing holder takes the re-armed value and runs no fill', async () => {
    expect(await getOrComputeWith(a, 'herd', options, () => 'last good')).toBe('last good');
    await sleep(TTL + 50);
    let failNow!: () => void;
    const holding = new Promise<void>((resolve) => {
      failNow = resolve;
    });
    const fillA = vi.fn(async (): Promise<string> => {
      await holding;
      throw new Error('database down');
    });
    const fromA = getOrComputeWith(a, 'herd', options, fillA);
    await vi.waitFor(() => expect(fillA).toHaveBeenCalled());
    const fillB = down();
    const fromB = getOrComputeWith(b, 'herd', options, fillB);
    await sleep(100);
    failNow();
    expect(await fromA).toBe('last good');
    expect(await fromB).toBe('last good');
    expect(fillB).not.toHaveBeenCalled();
  });

  it('a key invalidated by the other replica while the fill runs never comes back through fail-safe', async () => {
    expect(await getOrComputeWith(a, 'gone', options, () => 'old')).toBe('old');
    await sleep(TTL + 50);
    let failNow!: () => void;
    const holding = new Promise<void>((resolve) => {
      failNow = resolve;
    });
    const call = getOrComputeWith(a, 'gone', options, async () => {
      await holding;
      throw new Error('database down');
    }).then(
      () => undefined,
      (error: CacheFillError) => error,
    );
    await sleep(20);
    await invalidate(b, 'gone');
    failNow();
    expect((await call)?.kind).toBe('fill');
    expect((await stored('gone')).entry).toBeUndefined();
    expect(await getOrComputeWith(b, 'gone', options, () => 'fresh')).toBe('fresh');
  });

  it('soft timeout: the caller gets the last value at once, and the slow fill lands in Redis for the other replica', async () => {
    const soft = { ...options, softTimeout: 50, fillTimeout: 5_000 };
    expect(await getOrComputeWith(a, 'slow', soft, () => 'old')).toBe('old');
    await sleep(TTL + 50);
    let finish!: () => void;
    const slowDb = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const started = Date.now();
    expect(
      await getOrComputeWith(a, 'slow', soft, async () => {
        await slowDb;
        return 'new';
      }),
    ).toBe('old');
    expect(Date.now() - started).toBeLessThan(2_000);
    finish();
    await vi.waitFor(async () => expect((await stored('slow')).entry?.value).toBe('new'));
    expect(await getOrComputeWith(b, 'slow', soft, down())).toBe('new');
  });
});
