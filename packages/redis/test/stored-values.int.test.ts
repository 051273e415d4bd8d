import {
  type BackendErrorEvent,
  type CacheEntry,
  getOrCompute,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  onStampedeEvent,
  setValue,
} from '@stampede/core';
import type { SerializerOption } from '@stampede/core/adapter';
import {
  describeValue,
  NOT_STORABLE,
  randomPrefix,
  SERIALIZER_TABLE,
  testRedis,
} from '@stampede/test-support';
import * as devalue from 'devalue';
import { Redis } from 'ioredis';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// What setValue / a fill stores is what the next read sees: a ttl of 0 or an already expired entry
// removes the key, any accepted ttl is stored, and a value reads back as it was cached.

const prefix = randomPrefix('redis-values');
let client: Redis;
let count = 0;
/** How much later than a fill's start a competing set is made (ms; the guard compares ms timestamps). */
const LATER_BY_MS = 20;
const caches: RedisCache[] = [];
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

const newCache = (options: Partial<Parameters<typeof createRedisCache>[0]> = {}) => {
  const cache = createRedisCache({ client, prefix: `${prefix}${++count}:`, ...options });
  caches.push(cache);
  return cache;
};
const raw = (cache: RedisCache, key: string) => client.get(redisKeys(cache.prefix, key).value);
const written = (cache: RedisCache) =>
  vi.waitFor(() => expect(inFlightCount(cache)).toBe(0), { interval: 5 });
const entry = (
  value: unknown,
  createdAt: number,
  freshUntil: number,
  staleUntil = freshUntil,
): CacheEntry => ({
  value,
  createdAt,
  freshUntil,
  staleUntil,
});

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

describe('a write that reads as a miss at once removes what is stored', () => {
  it('setValue with ttl 0: the old value is gone, the next read misses and the next call fills', async () => {
    const cache = newCache();
    await setValue(cache, 'k', 'old', { ttl: 60_000 });
    expect(await getValue(cache, 'k')).toBe('old');
    await setValue(cache, 'k', 'new', { ttl: 0 });
    expect(await getValue(cache, 'k')).toBeUndefined();
    expect(await getValue(cache, 'k', { allowStale: true })).toBeUndefined();
    expect(await raw(cache, 'k')).toMatch(/^t\|\d+$/);
    expect(await getOrCompute(cache, 'k', 60_000, () => 'filled')).toBe('filled');
    expect(events).toEqual([]);
  });

  it('an entry already past its staleUntil: the old value is gone', async () => {
    const cache = newCache();
    await setValue(cache, 'k', 'old', { ttl: 60_000 });
    // Made after the value set: a write that started in the same few ms as a `setValue` loses to it
    // (see set-value-order.int.test.ts), so well after, beyond any clock estimate's uncertainty.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = Date.now();
    await cache.set('k', entry('expired', now, now - 2_000, now - 1_000), { ttl: 60_000 });
    expect(await cache.get('k')).toBeUndefined();
    expect(await raw(cache, 'k')).toMatch(/^t\|\d+$/);
  });

  it('unless a newer entry is there', async () => {
    const cache = newCache();
    const now = Date.now();
    await cache.set('k', entry('newer', now + 1_000, now + 60_000), { ttl: 60_000 });
    await cache.set('k', entry('removal', now, now), { ttl: 0 });
    expect((await cache.get('k'))?.value).toBe('newer');
  });

  it('and a fill that started before it cannot bring the old value back, on another instance', async () => {
    const [filler, setter] = [newCache(), newCache()];
    const setterOnSamePrefix = createRedisCache({ client, prefix: filler.prefix });
    caches.push(setterOnSamePrefix);
    let release: () => void = () => {};
    const slow = getOrCompute(
      filler,
      'k',
      60_000,
      () =>
        new Promise<string>((resolve) => {
          release = () => resolve('older fill');
        }),
    );
    await vi.waitFor(() => expect(inFlightCount(filler)).toBe(1));
    // The scenario: the set comes later than the fill's start by the clock the guard compares (ms).
    await new Promise((resolve) => setTimeout(resolve, LATER_BY_MS));
    await setValue(setterOnSamePrefix, 'k', 'expired at once', { ttl: 0 });
    release();
    expect(await slow).toBe('older fill');
    await written(filler);
    expect(await getValue(setterOnSamePrefix, 'k')).toBeUndefined();
    expect(setter).toBeDefined();
  });
});

describe('a direct write after a delete', () => {
  it('setValue replaces a tombstone whatever its time; a fill that started before it is refused', async () => {
    const cache = newCache();
    // A tombstone 2 s in the future of this replica's estimate of Redis's clock: as a delete looks to
    // a replica whose estimate is off (by a round trip, or a clock stepped since it measured).
    await getValue(cache, 'warm');
    const future = Date.now() + 2_000;
    await client.set(redisKeys(cache.prefix, 'k').value, `t|${future}`, 'PX', 60_000);
    await cache.set('k', entry('a fill from before', Date.now(), Date.now() + 60_000), { ttl: 60_000 });
    expect(await raw(cache, 'k')).toBe(`t|${future}`);
    await setValue(cache, 'k', 'set after the delete', { ttl: 60_000 });
    expect(await getValue(cache, 'k')).toBe('set after the delete');
  });

  it('invalidate then setValue, back to back, always reads back the value', async () => {
    const cache = newCache();
    for (let i = 0; i < 50; i++) {
      await invalidate(cache, 'k');
      await setValue(cache, 'k', i, { ttl: 60_000 });
      expect(await getValue(cache, 'k')).toBe(i);
    }
  });
});

describe('any accepted ttl is stored', () => {
  it.each([
    ['1e21', 1e21],
    ['Number.MAX_VALUE', Number.MAX_VALUE],
    ['2^53 ms', 2 ** 53],
  ])(
    'setValue with ttl %s: stored without PX, read back fresh, fresh forever (a lifetime past 2^53 ms is forever)',
    async (_label, ttl) => {
      const cache = newCache();
      await setValue(cache, 'k', { v: 1 }, { ttl });
      expect(await getValue(cache, 'k')).toEqual({ v: 1 });
      expect(await raw(cache, 'k')).toMatch(/^s1\|\d+\|\|\|\{"v":1\}$/);
      expect(await client.pttl(redisKeys(cache.prefix, 'k').value)).toBe(-1);
      expect(events).toEqual([]);
    },
  );

  it('a ttl within PX range keeps its PX; grace beyond it is fine too', async () => {
    const cache = newCache();
    await setValue(cache, 'year', 'v', { ttl: '365d' });
    const pttl = await client.pttl(redisKeys(cache.prefix, 'year').value);
    expect(pttl).toBeGreaterThan(364 * 86_400_000);
    expect(
      await getOrComputeWith(cache, 'swr', { ttl: 1e21, staleWhileRevalidate: Number.MAX_VALUE }, () => 'v'),
    ).toBe('v');
    await written(cache);
    expect(await getValue(cache, 'swr')).toBe('v');
    expect(await raw(cache, 'swr')).toMatch(/^s2\|\d+\|\|\|\d+\|"v"$/);
    expect(await client.pttl(redisKeys(cache.prefix, 'swr').value)).toBe(-1);
    expect(events).toEqual([]);
  });

  it('an entry with huge times still guards against older writes (the script reads its header)', async () => {
    const cache = newCache();
    await setValue(cache, 'k', 'huge', { ttl: 1e21 });
    const now = Date.now();
    await cache.set('k', entry('older', now - 60_000, now + 60_000), { ttl: 60_000 });
    expect(await getValue(cache, 'k')).toBe('huge');
  });

  it('a huge lockTtl and tombstoneTtl still lock and delete', async () => {
    const cache = newCache({ tombstoneTtl: 1e21 });
    const lock = await cache.tryAcquireFillLock?.('k', 1e21);
    expect(lock).toBeDefined();
    expect(await lock?.extend?.(Number.MAX_VALUE)).toBe(true);
    await lock?.release('filled');
    await setValue(cache, 'k', 'v', { ttl: 60_000 });
    await cache.delete('k');
    expect(await cache.get('k')).toBeUndefined();
    expect(events).toEqual([]);
  });
});

const SERIALIZERS: [string, SerializerOption | undefined, 2 | 3 | 4][] = [
  ['JSON (the default)', undefined, 2],
  ['superjson', superjson, 3],
  ['devalue', devalue, 4],
];

describe.each(SERIALIZERS)('a value reads back as it was cached, with %s', (_name, serializer, column) => {
  it.each(SERIALIZER_TABLE.map((row) => [row[0], row[1], row[column]] as const))(
    "%s: the fill's callers get what a later hit returns",
    async (label, make, expected) => {
      const cache = newCache({ serializer });
      const original = make();
      const [leader, joined] = await Promise.all([
        getOrCompute(cache, label, 60_000, () => original),
        getOrCompute(cache, label, 60_000, () => 'second fill'),
      ]);
      await written(cache);
      if (expected === NOT_STORABLE) {
        // The serializer refuses it: the callers get the value itself, nothing is stored, one event.
        expect(leader).toBe(original);
        expect(joined).toBe(original);
        expect(await raw(cache, label)).toBeNull();
        expect(events.map((event) => [event.operation, (event.error as { code?: string }).code])).toEqual([
          ['set', 'E_STAMPEDE_BACKEND_ENCODE'],
        ]);
        return;
      }
      const hit = await getOrCompute(cache, label, 60_000, () => 'unused');
      expect(describeValue(leader)).toBe(expected);
      expect(describeValue(joined)).toBe(expected);
      expect(describeValue(hit)).toBe(expected);
      expect(events).toEqual([]);
    },
  );
});

describe('the serializer option', () => {
  it('takes JSON, superjson and devalue as they are', async () => {
    for (const serializer of [JSON, superjson, devalue]) {
      const cache = newCache({ serializer });
      const at = new Date('2024-01-02T03:04:05.000Z');
      await setValue(cache, 'k', { at }, { ttl: 60_000 });
      const back = (await getValue<{ at: unknown }>(cache, 'k'))?.at;
      expect(serializer === JSON ? back : (back as Date).toISOString()).toBe(at.toISOString());
    }
  });

  it('roundTrip is the serializer there and back', () => {
    expect(newCache().roundTrip({ at: new Date(0), n: Number.NaN })).toEqual({
      at: '1970-01-01T00:00:00.000Z',
      n: null,
    });
    const map = new Map([[1, new Set([2])]]);
    expect(newCache({ serializer: superjson }).roundTrip(map)).toEqual(map);
    expect(() => newCache().roundTrip(1n)).toThrow(TypeError);
  });
});
