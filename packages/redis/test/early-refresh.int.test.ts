import { configure, getOrComputeWith, inFlightCount, stats } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// The fill's duration (`delta`) travels with the entry through Redis: written as an `s2|` envelope,
// read back by another instance, honoured by the write guard, and used by earlyRefresh.

const prefix = randomPrefix('redis-early');
let client: Redis;
const caches: RedisCache[] = [];

const newCache = (name = 'early') => {
  const cache = createRedisCache({ client, prefix, name });
  caches.push(cache);
  return cache;
};
const raw = (key: string) => client.get(redisKeys(prefix, key).value);
const written = (cache: RedisCache) =>
  vi.waitFor(() => expect(inFlightCount(cache)).toBe(0), { interval: 5 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  client = new Redis((await testRedis()).url);
});
afterEach(() => {
  configure({ random: Math.random });
});
afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe('delta through Redis', () => {
  it("a fill's duration is stored in the envelope and read back by another instance", async () => {
    const writer = newCache();
    const reader = newCache('early-reader');
    expect(
      await getOrComputeWith(writer, 'timed', { ttl: '1m' }, async () => {
        await sleep(60);
        return { n: 1 };
      }),
    ).toEqual({ n: 1 });
    await written(writer);
    const stored = await raw('timed');
    expect(stored).toMatch(/^s2\|\d+\|\d+\|\d+\|\d+\|\{"n":1\}$/);
    const delta = Number(stored?.split('|')[4]);
    expect(delta).toBeGreaterThanOrEqual(55);
    expect(delta).toBeLessThan(5_000);
    expect(await reader.get('timed')).toMatchObject({ value: { n: 1 }, delta });
  });

  it('an s1 entry of an older release still reads, without delta, and the write guard still orders it', async () => {
    const cache = newCache();
    const now = Date.now();
    await client.set(
      redisKeys(prefix, 'old').value,
      `s1|${now}|${now + 60_000}|${now + 60_000}|"old"`,
      'PX',
      60_000,
    );
    const read = await cache.get('old');
    expect(read?.value).toBe('old');
    expect(read?.delta).toBeUndefined();
    // A write older than the stored s1 entry is refused; a newer one (with a delta) replaces it.
    const base = { freshUntil: now + 60_000, staleUntil: now + 60_000 };
    await cache.set('old', { value: 'older', createdAt: now - 10_000, ...base, delta: 5 }, { ttl: 60_000 });
    expect((await cache.get('old'))?.value).toBe('old');
    await cache.set('old', { value: 'newer', createdAt: now + 10_000, ...base, delta: 5 }, { ttl: 60_000 });
    expect(await cache.get('old')).toMatchObject({ value: 'newer', delta: 5 });
  });

  it('the write guard reads an s2 header: a write older than the stored entry is refused', async () => {
    const cache = newCache();
    const now = Date.now();
    const base = { freshUntil: now + 60_000, staleUntil: now + 60_000 };
    await cache.set('s2', { value: 'stored', createdAt: now, ...base, delta: 40 }, { ttl: 60_000 });
    expect(await raw('s2')).toMatch(/^s2\|/);
    await cache.set('s2', { value: 'older', createdAt: now - 5_000, ...base }, { ttl: 60_000 });
    expect(await cache.get('s2')).toMatchObject({ value: 'stored', delta: 40 });
  });

  it('earlyRefresh near expiry: the hit answers at once and the refresh lands in the background', async () => {
    const cache = newCache();
    const options = { ttl: 5_000, earlyRefresh: true, distributedFillLock: true } as const;
    let fills = 0;
    const fill = async () => {
      fills++;
      await sleep(200);
      return `v${fills}`;
    };
    expect(await getOrComputeWith(cache, 'hot', options, fill)).toBe('v1');
    await written(cache);
    const before = stats().earlyRefreshes;
    // A draw of 0 counts as 2^-53: a head start of 36.7 delta (over 7 s), so any hit now refreshes.
    configure({ random: () => 0 });
    const started = performance.now();
    expect(await getOrComputeWith(cache, 'hot', options, fill)).toBe('v1');
    // The caller did not wait for the 200 ms refresh.
    expect(performance.now() - started).toBeLessThan(150);
    await written(cache);
    expect(stats().earlyRefreshes - before).toBe(1);
    // Never refreshes now: ln(1 - 2^-53) is about -1e-16.
    configure({ random: () => 1 - 2 ** -53 });
    expect(await getOrComputeWith(cache, 'hot', options, fill)).toBe('v2');
    expect(fills).toBe(2);
    expect(await cache.get('hot')).toMatchObject({ value: 'v2' });
    expect((await cache.get('hot'))?.delta).toBeGreaterThanOrEqual(195);
  });
});
