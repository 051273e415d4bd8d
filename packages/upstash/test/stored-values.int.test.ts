import {
  type BackendErrorEvent,
  type CacheEntry,
  getOrCompute,
  getValue,
  inFlightCount,
  onStampedeEvent,
  setValue,
} from '@stampede/core';
import type { SerializerOption } from '@stampede/core/adapter';
import { describeValue, NOT_STORABLE, SERIALIZER_TABLE } from '@stampede/test-support';
import * as devalue from 'devalue';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createUpstashCache, type UpstashCache, upstashKeys } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

// What setValue / a fill stores is what the next read sees: a ttl of 0 or an already expired entry
// removes the key, any accepted ttl is stored, and a value reads back as it was cached.

let h: Harness;
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

beforeAll(async () => {
  h = await startHarness('upstash-values');
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterEach(() => {
  events = [];
});
afterAll(async () => {
  stopListening();
  await h?.stop();
});

const newCache = (options: Partial<Parameters<typeof createUpstashCache>[0]> = {}) =>
  createUpstashCache({ client: h.client(), prefix: h.nextPrefix(), ...options });
const raw = (cache: UpstashCache, key: string) =>
  h.client({ automaticDeserialization: false }).get<string>(upstashKeys(cache.prefix, key).value);
const pttl = (cache: UpstashCache, key: string) => h.client().pttl(upstashKeys(cache.prefix, key).value);
const written = (cache: UpstashCache) =>
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

describe('a write that reads as a miss at once removes what is stored', () => {
  it.each([{ automaticDeserialization: true }, { automaticDeserialization: false }])(
    'setValue with ttl 0: the old value is gone and the next call fills (%o)',
    async (mode) => {
      const cache = newCache({ client: h.client(mode) });
      await setValue(cache, 'k', 'old', { ttl: 60_000 });
      expect(await getValue(cache, 'k')).toBe('old');
      await setValue(cache, 'k', 'new', { ttl: 0 });
      expect(await getValue(cache, 'k', { allowStale: true })).toBeUndefined();
      expect(await raw(cache, 'k')).toMatch(/^t\|\d+$/);
      expect(await getOrCompute(cache, 'k', 60_000, () => 'filled')).toBe('filled');
      expect(events).toEqual([]);
    },
  );

  it('an entry already past its staleUntil removes the old value, unless a newer entry is there', async () => {
    const cache = newCache();
    await setValue(cache, 'k', 'old', { ttl: 60_000 });
    // Made after the value set: a write that started in the same few ms as a `setValue` loses to it
    // (the two are stamped by the low and the high end of the server clock's estimate).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = Date.now();
    await cache.set('k', entry('expired', now, now - 2_000, now - 1_000), { ttl: 60_000 });
    expect(await cache.get('k')).toBeUndefined();
    await cache.set('n', entry('newer', now + 1_000, now + 60_000), { ttl: 60_000 });
    await cache.set('n', entry('removal', now, now), { ttl: 0 });
    expect((await cache.get('n'))?.value).toBe('newer');
  });
});

describe('any accepted ttl is stored', () => {
  it.each([
    ['1e21', 1e21],
    ['Number.MAX_VALUE', Number.MAX_VALUE],
  ])(
    'setValue with ttl %s: stored without PX, read back fresh, fresh forever (a lifetime past 2^53 ms is forever)',
    async (_label, ttl) => {
      const cache = newCache();
      await setValue(cache, 'k', { v: 1 }, { ttl });
      expect(await getValue(cache, 'k')).toEqual({ v: 1 });
      expect(await raw(cache, 'k')).toMatch(/^s1\|\d+\|\|\|\{"v":1\}$/);
      expect(await pttl(cache, 'k')).toBe(-1);
      const now = Date.now();
      await cache.set('k', entry('older', now - 60_000, now + 60_000), { ttl: 60_000 });
      expect(await getValue(cache, 'k')).toEqual({ v: 1 });
      expect(events).toEqual([]);
    },
  );

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
  it("takes JSON, superjson, devalue, and the first release's { serialize, deserialize } shape", async () => {
    for (const serializer of [JSON, superjson, devalue]) {
      const cache = newCache({ serializer });
      await setValue(cache, 'k', { at: new Date(0) }, { ttl: 60_000 });
      const back = (await getValue<{ at: unknown }>(cache, 'k'))?.at;
      expect(back instanceof Date ? back.toISOString() : back).toBe('1970-01-01T00:00:00.000Z');
    }
    const legacy = newCache({
      serializer: {
        serialize: (v) => `legacy:${JSON.stringify(v)}`,
        deserialize: (t) => JSON.parse(t.slice(7)),
      },
    });
    await setValue(legacy, 'k', [3], { ttl: 60_000 });
    expect(await raw(legacy, 'k')).toMatch(/\|~[0-9a-f]{8}~legacy:\[3\]$/);
    expect(await getValue(legacy, 'k')).toEqual([3]);
  });
});
