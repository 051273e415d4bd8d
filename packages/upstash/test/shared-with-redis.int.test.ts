import { getValue, invalidate, invalidateTag, setValue } from '@stampede/core';
import { createRedisCache } from '@stampede/redis';
import { testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

// An Upstash cache and a @stampede/redis cache given the same prefix on the same database share
// entries, tombstones, removals and the lock, byte for byte.

let h: Harness;
let ioredis: Redis;

beforeAll(async () => {
  h = await startHarness('upstash-shared');
  ioredis = new Redis((await testRedis()).url);
});
afterAll(async () => {
  ioredis?.disconnect();
  await h?.stop();
});

function pair() {
  const prefix = h.nextPrefix();
  return [
    createUpstashCache({ client: h.client(), prefix }),
    createRedisCache({ client: ioredis, prefix }),
  ] as const;
}

describe('an Upstash and a Redis cache with one prefix', () => {
  it("read each other's entries, with times that agree to within a round trip", async () => {
    const [upstash, redis] = pair();
    // Each cache's first call measures Redis's clock: its estimate is as good as that round trip.
    let roundTrip = 0;
    const timed = async (call: () => Promise<unknown>) => {
      const started = performance.now();
      await call();
      roundTrip = Math.max(roundTrip, performance.now() - started);
    };
    await timed(() =>
      setValue(upstash, 'a', { from: 'upstash' }, { ttl: 60_000, staleWhileRevalidate: 1e21 }),
    );
    await timed(() => setValue(redis, 'b', { from: 'redis' }, { ttl: 60_000 }));
    for (const key of ['a', 'b']) {
      const [viaUpstash, viaRedis] = [await upstash.get(key), await redis.get(key)];
      expect(viaRedis?.value).toEqual(viaUpstash?.value);
      // Each converts Redis's clock to this process's with its own measured offset.
      const drift = Math.abs((viaRedis?.createdAt ?? 0) - (viaUpstash?.createdAt ?? Number.NaN));
      expect(drift).toBeLessThanOrEqual(Math.max(50, roundTrip));
      expect(Math.abs((viaRedis?.freshUntil ?? 0) - (viaUpstash?.freshUntil ?? Number.NaN))).toBe(drift);
    }
    expect(await getValue(redis, 'a')).toEqual({ from: 'upstash' });
    expect(await getValue(upstash, 'b')).toEqual({ from: 'redis' });
  });

  it("honour each other's deletes and removals", async () => {
    const [upstash, redis] = pair();
    await setValue(redis, 'k', 'v', { ttl: 60_000 });
    await invalidate(upstash, 'k');
    expect(await getValue(redis, 'k')).toBeUndefined();
    const before = Date.now() - 1_000;
    await redis.set(
      'k',
      { value: 'older', createdAt: before, freshUntil: before + 60_000, staleUntil: before + 60_000 },
      { ttl: 60_000 },
    );
    expect(await getValue(upstash, 'k')).toBeUndefined();
    await setValue(upstash, 'j', 'v', { ttl: 60_000 });
    await setValue(redis, 'j', 'gone', { ttl: 0 });
    expect(await getValue(upstash, 'j')).toBeUndefined();
  });

  it("order each other's tagged setValues and tag invalidations on Redis", async () => {
    const prefix = h.nextPrefix();
    const upstash = createUpstashCache({ client: h.client(), prefix });
    const redis = createRedisCache({ client: ioredis, prefix });
    await setValue(redis, 'r', 'old', { ttl: 60_000, tags: ['shared'] });
    await setValue(upstash, 'u', 'old', { ttl: 60_000, tags: ['shared'] });
    await invalidateTag(upstash, 'shared');
    expect([await getValue(redis, 'r'), await getValue(redis, 'u')]).toEqual([undefined, undefined]);
    // A setValue in the millisecond of an invalidation (the tag recorded a few ms past Redis's
    // clock makes that certain) is served; invalidating any of its tags again hides it.
    const [seconds, micros] = await ioredis.time();
    const now = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    await ioredis.set(`${prefix}{shared}:tag`, String(now + 5));
    await setValue(upstash, 'u', 'set after', { ttl: 60_000, tags: ['shared', 'other'] });
    expect(await getValue(redis, 'u')).toBe('set after');
    await invalidateTag(redis, 'other');
    expect(await getValue(upstash, 'u')).toBeUndefined();
    await redis.close();
  });

  it('contend for one lock', async () => {
    const [upstash, redis] = pair();
    const held = await upstash.tryAcquireFillLock?.('k', 5_000);
    expect(held).toBeDefined();
    expect(await redis.tryAcquireFillLock?.('k', 5_000)).toBeUndefined();
    await held?.release('filled');
    const next = await redis.tryAcquireFillLock?.('k', 5_000);
    expect(next).toBeDefined();
    await next?.release('filled');
    await redis.close();
  });
});
