// The cache object stays in V8's fast mode (a hidden class), however many caches the process makes:
// in dictionary mode every call of the cache's `get` on the hit path starts with a hash lookup
// (a stale read answered during a refresh cost 64-98 ns a call, 31 ns in fast mode). A literal
// holding an accessor (`get size()`) made the first cache so, and an accessor defined per cache
// (a closure) made every cache after the first so.
import type { CacheEntry } from '@stampede/core';
import { CHANGES } from '@stampede/core/adapter';
import { hasFastProperties } from '@stampede/test-support';
import { LRUCache } from 'lru-cache';
import { describe, expect, it } from 'vitest';
import { createMemoryCache } from '../src/index.js';

const entry = (value: unknown): CacheEntry => ({
  value,
  createdAt: Date.now(),
  freshUntil: Date.now() + 60_000,
  staleUntil: Date.now() + 60_000,
});

describe('the memory cache object', () => {
  it('is in fast mode, for every cache made, on its own lru or a given one', () => {
    const given = new LRUCache<string, CacheEntry>({ max: 10 });
    const caches = [
      createMemoryCache(),
      createMemoryCache({ max: 5 }),
      createMemoryCache({ lru: given }),
      createMemoryCache({ lru: given }),
      createMemoryCache({ lru: new LRUCache<string, CacheEntry>({ max: 10, updateAgeOnGet: true }) }),
    ];
    expect(caches.map((cache) => hasFastProperties(cache))).toEqual([true, true, true, true, true]);
    expect(caches.map((cache) => hasFastProperties(cache.lru))).toEqual([true, true, true, true, true]);
  });

  it('keeps `size` live and enumerable, and the change count per cache', () => {
    const first = createMemoryCache();
    const second = createMemoryCache();
    first.set('a', entry(1), { ttl: 60_000 });
    first.set('b', entry(2), { ttl: 60_000 });
    second.set('a', entry(1), { ttl: 60_000 });
    expect([first.size, second.size]).toEqual([2, 1]);
    expect(Object.keys(first)).toContain('size');
    expect(Object.getOwnPropertyDescriptor(first, 'size')?.enumerable).toBe(true);
    const counts = (): unknown[] => [first[CHANGES as never], second[CHANGES as never]];
    const before = counts();
    first.get('a');
    const after = counts();
    expect(after[0]).toBe((before[0] as number) + 1);
    expect(after[1]).toBe(before[1]);
    expect(Object.keys(first)).not.toContain(CHANGES);
  });
});
