import { type CacheEntry, getOrCompute, getOrComputeWith, resetStats, stats } from '@stampede/core';
import { LRUCache } from 'lru-cache';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('createMemoryCache', () => {
  it('serves hits without serialising: the same object comes back', async () => {
    const cache = createMemoryCache();
    const value = { nested: { list: [1, 2, 3] }, when: new Date(0), big: 10n };
    const first = await getOrCompute(cache, 'k', '1m', () => value);
    const second = await getOrCompute(cache, 'k', '1m', () => ({ other: true }));
    expect(first).toBe(value);
    expect(second).toBe(value);
    expect(stats()).toMatchObject({ hits: 1, misses: 1, fills: 1 });
  });

  it('answers synchronously (no promise on the read path)', () => {
    const cache = createMemoryCache();
    expect(cache.get('missing')).toBeUndefined();
    const entry = {
      value: 1,
      createdAt: 1,
      freshUntil: Date.now() + 60_000,
      staleUntil: Date.now() + 60_000,
    };
    cache.set('k', entry, { ttl: undefined });
    expect(cache.get('k')).toEqual(entry);
  });

  it('keeps an entry physically for ttl + grace, and drops it after', async () => {
    vi.useFakeTimers({ now: 5_000_000 });
    const cache = createMemoryCache();
    await getOrComputeWith(cache, 'k', { ttl: '10s', staleWhileRevalidate: '20s' }, () => 'v');
    vi.advanceTimersByTime(29_000);
    expect(cache.get('k')?.value).toBe('v');
    vi.advanceTimersByTime(2_000);
    expect(cache.get('k')).toBeUndefined();
  });

  it('evicts the least recently used entry past max', async () => {
    const cache = createMemoryCache({ max: 2 });
    await getOrCompute(cache, 'a', undefined, () => 1);
    await getOrCompute(cache, 'b', undefined, () => 2);
    await getOrCompute(cache, 'a', undefined, () => 1);
    await getOrCompute(cache, 'c', undefined, () => 3);
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')?.value).toBe(1);
  });

  it('uses an LRUCache you already own', async () => {
    const lru = new LRUCache<string, CacheEntry>({ max: 5 });
    const cache = createMemoryCache({ lru, name: 'owned' });
    await getOrCompute(cache, 'k', '1m', () => 'v');
    expect(lru.get('k')?.value).toBe('v');
    expect(cache.lru).toBe(lru);
    expect(cache.name).toBe('owned');
    cache.clear();
    expect(lru.size).toBe(0);
  });

  it('caches in an LRUCache bounded by size when it has a sizeCalculation', async () => {
    const lru = new LRUCache<string, CacheEntry>({
      maxSize: 10,
      sizeCalculation: (entry) => String(entry.value).length,
    });
    const cache = createMemoryCache({ lru });
    let fills = 0;
    const fill = () => {
      fills++;
      return 'abcd';
    };
    for (const key of ['a', 'a', 'b', 'c']) await getOrCompute(cache, key, '1m', fill);
    // 'a' was a hit once; three values of size 4 do not fit in 10: the oldest went.
    expect(fills).toBe(3);
    expect(lru.calculatedSize).toBe(8);
    expect(lru.has('a')).toBe(false);
  });

  it('refuses an entry its size-bounded lru would not keep, saying so once', async () => {
    const lru = new LRUCache<string, CacheEntry>({
      maxSize: 10,
      sizeCalculation: (entry) => String(entry.value).length,
    });
    const cache = createMemoryCache({ lru, name: 'sized' });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const now = Date.now();
      const big = {
        value: 'x'.repeat(20),
        createdAt: now,
        freshUntil: now + 60_000,
        staleUntil: now + 60_000,
      };
      expect(cache.set('k', big, { ttl: 60_000 })).toBe(false);
      expect(cache.set('j', { ...big, createdAt: now + 1 }, { ttl: 60_000 })).toBe(false);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(/memory cache 'sized' could not keep the entry of 'k'/);
      expect(cache.set('k', { ...big, value: 'small' }, { ttl: 60_000 })).toBe(true);
    } finally {
      warn.mockRestore();
    }
  });

  it('does not store a value whose ttl is zero', async () => {
    const cache = createMemoryCache();
    expect(await getOrCompute(cache, 'k', 0, () => 'once')).toBe('once');
    expect(cache.size).toBe(0);
  });

  it.each([
    ['1e21', 1e21],
    ['Number.MAX_VALUE', Number.MAX_VALUE],
    ['30 days', 30 * 86_400_000],
  ])('caches a ttl of %s and reads it as fresh', async (_name, ttl) => {
    // Starts at the real time: core's hit clock may still hold a reading from the tests before.
    vi.useFakeTimers();
    const cache = createMemoryCache();
    await getOrComputeWith(cache, 'k', { ttl, staleWhileRevalidate: ttl }, () => 'v');
    vi.advanceTimersByTime(25 * 86_400_000);
    expect(await getOrCompute(cache, 'k', ttl, () => 'refilled')).toBe('v');
    expect(stats()).toMatchObject({ fills: 1, hits: 1 });
  });

  it('rejects bad options with errors that name them', () => {
    expect(() => createMemoryCache({ max: 0 })).toThrow(/options\.max/);
    expect(() => createMemoryCache({ max: 1.5 })).toThrow(RangeError);
    expect(() => createMemoryCache({ max: '10' as never })).toThrow(
      new TypeError('options.max must be a number; got string'),
    );
    expect(() => createMemoryCache([] as never)).toThrow(
      new TypeError('options must be an object; got array'),
    );
    expect(() => createMemoryCache({ max: 2 ** 60 })).toThrow(
      /options\.max must be a positive integer up to/,
    );
    expect(() => createMemoryCache({ max: 2 ** 32 })).toThrow(RangeError);
    // lru-cache allocates every slot up front: these aborted the process (out of memory) before.
    expect(() => createMemoryCache({ max: 2 ** 32 - 1 })).toThrow(
      /options\.max must be a positive integer up to 16777216/,
    );
    expect(() => createMemoryCache({ max: 2 ** 24 + 1 })).toThrow(RangeError);
    // lru-cache refuses a write without a size once it limits sizes: nothing would ever be cached.
    expect(() => createMemoryCache({ lru: new LRUCache({ maxSize: 5_000 }) })).toThrow(/sizeCalculation/);
    expect(() => createMemoryCache({ lru: new LRUCache({ max: 10, maxEntrySize: 500 }) })).toThrow(TypeError);
    expect(() => createMemoryCache({ name: '' })).toThrow(/options\.name/);
    // lru-cache's own options are not this factory's: a `ttl` here would be silently ignored.
    expect(() => createMemoryCache({ max: 5, ttl: 1_000 } as never)).toThrow(
      new TypeError('options.ttl is not an option (known: max, name, lru)'),
    );
    expect(() => createMemoryCache({ maxx: 5 } as never)).toThrow(
      "options.maxx is not an option (did you mean 'max'?)",
    );
    expect(() => createMemoryCache({ lru: new Map() as unknown as LRUCache<string, CacheEntry> })).toThrow(
      /options\.lru/,
    );
    expect(() => createMemoryCache(null as unknown as object)).toThrow(TypeError);
  });
});
