import {
  type BackendErrorEvent,
  getOrCompute,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  onStampedeEvent,
  setValue,
} from '@stampede/core';
import { freePort, randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, isRedisCacheError, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const prefix = randomPrefix('redis-cache');
let client: Redis;
const caches: RedisCache[] = [];
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

/** Resolves once the writes of `cache`'s fills have landed (their flights leave the registry then). */
const written = (cache: RedisCache) => vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
const newCache = (options: Partial<Parameters<typeof createRedisCache>[0]> = {}) => {
  const cache = createRedisCache({ client, prefix, name: `cache-${caches.length}`, ...options });
  caches.push(cache);
  return cache;
};

beforeAll(async () => {
  client = new Redis((await testRedis()).url);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterEach(() => {
  events = [];
});
afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe('stored format', () => {
  it('stores the versioned envelope with a physical TTL of ttl + grace (PX, ms)', async () => {
    const cache = newCache();
    await getOrComputeWith(cache, 'format', { ttl: 60_000, staleWhileRevalidate: 30_000 }, () => ({ n: 1 }));
    await written(cache);
    const key = redisKeys(prefix, 'format').value;
    expect(await client.get(key)).toMatch(/^s2\|\d+\|\d+\|\d+\|\d+\|\{"n":1\}$/);
    const pttl = await client.pttl(key);
    expect(pttl).toBeGreaterThan(85_000);
    expect(pttl).toBeLessThanOrEqual(90_000);
  });

  it("uses a pluggable serializer, also of the first release's { serialize, deserialize } shape", async () => {
    const serializer = {
      stringify: (value: unknown) => `custom:${JSON.stringify(value)}`,
      parse: (text: string) => JSON.parse(text.slice('custom:'.length)),
    };
    const legacy = {
      serialize: (value: unknown) => `legacy:${JSON.stringify(value)}`,
      deserialize: (text: string) => JSON.parse(text.slice('legacy:'.length)),
    };
    const cache = newCache({ serializer });
    await setValue(cache, 'custom', [1, 2], { ttl: 60_000 });
    expect(await client.get(redisKeys(prefix, 'custom').value)).toMatch(/\|~[0-9a-f]{8}~custom:\[1,2\]$/);
    expect((await cache.get('custom'))?.value).toEqual([1, 2]);
    const old = newCache({ serializer: legacy });
    await setValue(old, 'legacy', [3], { ttl: 60_000 });
    expect(await client.get(redisKeys(prefix, 'legacy').value)).toMatch(/\|~[0-9a-f]{8}~legacy:\[3\]$/);
    expect((await old.get('legacy'))?.value).toEqual([3]);
  });

  it("reads an entry another serializer wrote as a miss plus a decode event, not as that format's value", async () => {
    // superjson's shape: JSON.parse reads its text too, as `{ json: ... }`.
    const wrapped = {
      stringify: (value: unknown) => JSON.stringify({ json: value }),
      parse: (text: string) => (JSON.parse(text) as { json: unknown }).json,
    };
    const writer = newCache({ serializer: wrapped });
    const reader = newCache();
    await setValue(writer, 'mixed', [1, 2], { ttl: 60_000 });
    expect(await reader.get('mixed')).toBeUndefined();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ operation: 'decode', key: 'mixed', cache: reader.name });
    expect(String(events[0]?.error)).toMatch(/written with another serializer/);
    await setValue(reader, 'mixed', [3], { ttl: 60_000 });
    expect(await writer.get('mixed')).toBeUndefined();
    expect(events).toHaveLength(2);
  });

  it.each([
    ['garbage', 'not an envelope'],
    ['another version', 's9|1|2|3|{}'],
    ['a bad payload', `s1|${Date.now()}|${Date.now() + 60_000}|${Date.now() + 60_000}|{not json`],
    // Found by the chaos suite's fuzzer: headers that look like an entry from the future must not
    // make the write guard refuse the repairing write.
    ['another version from the future', `s9|${Date.now() + 3_600_000}|1|2|{}`],
    ['a corrupted header', `s11${Date.now()}|${Date.now() + 3_600_000}|${Date.now() + 3_600_000}|{}`],
  ])('reads %s as a miss plus a counted decode event, then fills over it', async (_label, stored) => {
    const cache = newCache();
    const key = `undecodable-${_label}`;
    await client.set(redisKeys(prefix, key).value, stored);
    expect(await cache.get(key)).toBeUndefined();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ operation: 'decode', key, cache: cache.name });
    expect(isRedisCacheError(events[0]?.error)).toBe(true);
    expect(await getOrCompute(cache, key, 60_000, () => 'repaired')).toBe('repaired');
    expect((await cache.get(key))?.value).toBe('repaired');
  });

  it.each([
    ['a BigInt', () => 10n],
    [
      'a cycle',
      () => {
        const cyclic: { self?: unknown } = {};
        cyclic.self = cyclic;
        return cyclic;
      },
    ],
  ])('gives the caller %s it cannot store, with a clear error event', async (_label, make) => {
    const cache = newCache();
    const value = make();
    expect(await getOrCompute(cache, `unserialisable-${_label}`, 60_000, () => value)).toBe(value);
    await written(cache);
    expect(events).toHaveLength(1);
    expect(events[0]?.operation).toBe('set');
    expect(events[0]?.error).toMatchObject({
      code: 'E_STAMPEDE_BACKEND_ENCODE',
      key: `unserialisable-${_label}`,
    });
    expect(String(events[0]?.error)).toMatch(/cannot serialise/);
    expect(await client.exists(redisKeys(prefix, `unserialisable-${_label}`).value)).toBe(0);
    await expect(setValue(cache, 'unserialisable-direct', 1n)).rejects.toMatchObject({
      code: 'E_STAMPEDE_BACKEND_ENCODE',
    });
  });
});

describe('stale-write guard across replicas', () => {
  it('keeps an invalidation from being undone by a fill that started before it', async () => {
    // Two cache objects are two core states: the in-process guard cannot help, only Redis can.
    const [filler, invalidator] = [newCache(), newCache()];
    let release: (() => void) | undefined;
    const slow = getOrCompute(
      filler,
      'guarded',
      60_000,
      () =>
        new Promise<string>((resolve) => {
          release = () => resolve('before the invalidation');
        }),
    );
    // The fill has started (after its read) before the other replica invalidates.
    const releaseFill = await waitFor(() => release, { message: 'the fill to start' });
    await invalidate(invalidator, 'guarded');
    releaseFill();
    expect(await slow).toBe('before the invalidation');
    // The refused write has landed once the flight leaves the registry (the core keeps a settled
    // flight joinable until its write lands).
    await written(filler);
    expect(await filler.get('guarded')).toBeUndefined();
    expect(await getOrCompute(filler, 'guarded', 60_000, () => 'after')).toBe('after');
    expect((await invalidator.get('guarded'))?.value).toBe('after');
  });

  it('writes a bounded tombstone that reads as a miss', async () => {
    const cache = newCache({ tombstoneTtl: 5_000 });
    await setValue(cache, 'tombstone', 'v', { ttl: 60_000 });
    await invalidate(cache, 'tombstone');
    const key = redisKeys(prefix, 'tombstone').value;
    expect(await client.get(key)).toMatch(/^t\|\d+$/);
    expect(await client.pttl(key)).toBeGreaterThan(0);
    expect(await client.pttl(key)).toBeLessThanOrEqual(5_000);
    expect(await cache.get('tombstone')).toBeUndefined();
    expect(events).toEqual([]);
  });

  it('never replaces a newer entry, whoever wrote it', async () => {
    const [a, b] = [newCache(), newCache()];
    const now = Date.now();
    // `set` answers whether it stored the write (a tiered cache drops its local copy on `false`).
    expect(
      await a.set(
        'newer',
        { value: 'new', createdAt: now, freshUntil: now + 60_000, staleUntil: now + 60_000 },
        { ttl: 60_000 },
      ),
    ).toBe(true);
    expect(
      await b.set(
        'newer',
        { value: 'old', createdAt: now - 5, freshUntil: now + 60_000, staleUntil: now + 60_000 },
        { ttl: 60_000 },
      ),
    ).toBe(false);
    expect((await b.get('newer'))?.value).toBe('new');
  });
});

describe('faults', () => {
  it('bounds every call in time when Redis is unreachable, and the fill still answers', async () => {
    // Nothing listens on this port: ioredis keeps the commands in its offline queue.
    const port = await freePort();
    const unreachable = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null });
    unreachable.on('error', () => {});
    const cache = createRedisCache({ client: unreachable, prefix, operationTimeout: 150 });
    try {
      const started = Date.now();
      await expect(cache.get('k')).rejects.toMatchObject({ code: 'E_STAMPEDE_BACKEND_TIMEOUT', key: 'k' });
      await expect(cache.tryAcquireFillLock?.('k', 1_000)).rejects.toMatchObject({
        code: 'E_STAMPEDE_BACKEND_TIMEOUT',
      });
      await expect(cache.delete('k')).rejects.toMatchObject({ code: 'E_STAMPEDE_BACKEND_TIMEOUT' });
      expect(Date.now() - started).toBeLessThan(2_000);
      const answered = Date.now();
      const value = await getOrComputeWith(
        cache,
        'k',
        { ttl: 60_000, distributedFillLock: true },
        () => 'local',
      );
      expect(value).toBe('local');
      expect(Date.now() - answered).toBeLessThan(2_000);
      // The caller has its value before the (timing-out) write ends: wait for the write's report.
      // The cache's warm-up (its scripts' SCRIPT LOAD) times out too, and is reported once.
      await waitFor(() => events.length >= 4, { timeout: 2_000, message: 'the write to time out' });
      expect(events.map((event) => event.operation).sort()).toEqual(['get', 'lock', 'set', 'warm-up']);
    } finally {
      await cache.close();
      unreachable.disconnect();
    }
  });

  it('closes only the subscriber connection it opened', async () => {
    const own = new Redis((await testRedis()).url);
    const cache = createRedisCache({ client: own, prefix });
    const stop = cache.onFillDone('closing', () => {});
    // The subscriber connection exists once its SUBSCRIBE has landed.
    const { channel } = redisKeys(prefix, 'closing');
    await waitFor(async () => ((await own.pubsub('NUMSUB', channel)) as [string, number])[1] > 0, {
      message: 'the subscription to land',
    });
    const name = (await own.client('ID')) as number;
    stop();
    await cache.close();
    expect(await own.ping()).toBe('PONG');
    expect(name).toBeGreaterThan(0);
    expect(cache.onFillDone('closing', () => {})).toBeTypeOf('function');
    own.disconnect();
  });
});
