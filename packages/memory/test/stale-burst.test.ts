// The memory cache counts its changes (CHANGES), so the core answers a burst of stale reads during a
// refresh from the burst's first read. Any change to the key between two reads of the burst must
// show at the next read: through the cache's methods, and on an lru it made, directly on `lru`.
import { getOrComputeWith, invalidateTag, resetStats, setValue, stats } from '@stampede/core';
import { CHANGES } from '@stampede/core/adapter';
import { LRUCache } from 'lru-cache';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache, type MemoryCache } from '../src/index.js';

const OPTIONS = { ttl: 30_000, staleWhileRevalidate: 300_000, tags: ['t'] };

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 5_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** The cache's change count: it moves by one for each read the cache makes. */
const countOf = (cache: MemoryCache): number => (cache as MemoryCache & { [CHANGES]: number })[CHANGES];

/** `cache` holding 'old' for 'k', stale, its refresh held until `release('new')`. */
async function staleDuringRefresh(cache: MemoryCache) {
  await getOrComputeWith(cache, 'k', OPTIONS, () => 'old');
  vi.advanceTimersByTime(30_001);
  let release: (value: string) => void = () => {};
  const held = new Promise<string>((resolve) => {
    release = resolve;
  });
  expect(await getOrComputeWith(cache, 'k', OPTIONS, () => held)).toBe('old');
  return release;
}

describe('a burst of stale reads during a refresh, on the memory cache', () => {
  it('reads the lru for its first read only', async () => {
    const cache = createMemoryCache();
    const release = await staleDuringRefresh(cache);
    const before = countOf(cache);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => getOrComputeWith(cache, 'k', OPTIONS, () => 'unused')),
    );
    expect(countOf(cache) - before).toBe(1);
    expect(new Set(answers)).toEqual(new Set(['old']));
    expect(stats().staleHits).toBe(101);
    release('new');
  });

  const changes: [string, (cache: MemoryCache) => unknown, string][] = [
    ['delete', (cache) => cache.delete('k'), 'new'],
    ['clear', (cache) => cache.clear(), 'new'],
    // invalidateTag also stops the refresh (it carries the tag): the next call fills afresh.
    ['invalidateTag', (cache) => invalidateTag(cache, 't'), 'filled'],
    ['lru.delete, on the lru it made', (cache) => cache.lru.delete('k'), 'new'],
    ['lru.clear, on the lru it made', (cache) => cache.lru.clear(), 'new'],
    [
      'lru.set, on the lru it made',
      (cache) => {
        const now = Date.now();
        cache.lru.set('k', {
          value: 'direct',
          createdAt: now,
          freshUntil: now + 30_000,
          staleUntil: now + 60_000,
        });
      },
      'direct',
    ],
  ];
  it.each(changes)('sees %s at its next read', async (_name, change, expected) => {
    const cache = createMemoryCache();
    const release = await staleDuringRefresh(cache);
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled')).toBe('old');
    const count = () => (cache as MemoryCache & { [CHANGES]: number })[CHANGES];
    const before = count();
    await change(cache);
    expect(count()).toBeGreaterThan(before);
    const next = getOrComputeWith(cache, 'k', OPTIONS, () => 'filled');
    release('new');
    expect(await next).toBe(expected);
  });

  it('on an lru of the caller own, counts what goes through the cache', async () => {
    const lru = new LRUCache<string, never>({ max: 100 }) as unknown as NonNullable<
      Parameters<typeof createMemoryCache>[0]
    >['lru'];
    const cache = createMemoryCache({ lru });
    const release = await staleDuringRefresh(cache);
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled')).toBe('old');
    cache.delete('k');
    const next = getOrComputeWith(cache, 'k', OPTIONS, () => 'filled');
    release('new');
    expect(await next).toBe('new');
  });

  it('on a frozen cache: writes still count, and the burst still reads once', async () => {
    const cache = Object.freeze(createMemoryCache());
    const release = await staleDuringRefresh(cache);
    const before = countOf(cache);
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled')).toBe('old');
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled')).toBe('old');
    expect(countOf(cache) - before).toBe(1);
    cache.delete('k');
    const next = getOrComputeWith(cache, 'k', OPTIONS, () => 'filled');
    release('new');
    expect(await next).toBe('new');
  });

  it('on a copy of the cache (its own properties spread), every call reads: the copy has no count', async () => {
    const original = createMemoryCache();
    const cache = { ...original };
    expect(CHANGES in cache).toBe(false);
    const release = await staleDuringRefresh(cache as MemoryCache);
    // The copy's methods are the original's: its reads move the original's count.
    const before = countOf(original);
    for (let i = 0; i < 5; i++)
      expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled')).toBe('old');
    expect(countOf(original) - before).toBe(5);
    cache.delete('k');
    const next = getOrComputeWith(cache, 'k', OPTIONS, () => 'filled');
    release('new');
    expect(await next).toBe('new');
  });

  it("keeps the lru's order as reads would: a key read between other keys' reads is not the one evicted", async () => {
    // max 3: k (stale, its refresh held and then failing), a and b. Reads of k between reads of a
    // and b keep k recently used, so writing c evicts a, and k's stale value outlives the failed
    // refresh, as it does when every call reads.
    const cache = createMemoryCache({ max: 3 });
    await getOrComputeWith(cache, 'k', OPTIONS, () => 'old');
    vi.advanceTimersByTime(30_001);
    await getOrComputeWith(cache, 'a', OPTIONS, () => 'a');
    await getOrComputeWith(cache, 'b', OPTIONS, () => 'b');
    let fail: (error: Error) => void = () => {};
    const failing = new Promise<string>((_resolve, reject) => {
      fail = reject;
    });
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => failing)).toBe('old');
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'unused')).toBe('old');
    expect(await getOrComputeWith(cache, 'a', OPTIONS, () => 'unused')).toBe('a');
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'unused')).toBe('old');
    expect(await getOrComputeWith(cache, 'b', OPTIONS, () => 'unused')).toBe('b');
    expect(await getOrComputeWith(cache, 'k', OPTIONS, () => 'unused')).toBe('old');
    await getOrComputeWith(cache, 'c', OPTIONS, () => 'c');
    expect([...cache.lru.keys()].sort()).toEqual(['b', 'c', 'k']);
    fail(new Error('database down'));
    await vi.advanceTimersByTimeAsync(0);
    const refill = vi.fn(() => 'refilled');
    expect(await getOrComputeWith(cache, 'k', OPTIONS, refill)).toBe('old');
  });

  it('two caches on one given lru count each other: a write through one is read through the other', async () => {
    const lru = new LRUCache<string, never>({ max: 100 }) as unknown as NonNullable<
      Parameters<typeof createMemoryCache>[0]
    >['lru'];
    const a = createMemoryCache({ lru });
    const b = createMemoryCache({ lru });
    const release = await staleDuringRefresh(a);
    expect(await getOrComputeWith(a, 'k', OPTIONS, () => 'filled')).toBe('old');
    await setValue(b, 'k', 'written through b', { ttl: 30_000 });
    expect(await getOrComputeWith(a, 'k', OPTIONS, () => 'filled')).toBe('written through b');
    release('new');
  });

  it('an object inheriting the cache with a get of its own has no count, and every call reads through it', async () => {
    const cache = createMemoryCache();
    const copies = Object.create(cache) as MemoryCache;
    copies.get = (key: string) => {
      const entry = cache.get(key);
      return entry === undefined ? undefined : { ...entry, value: { ...(entry.value as object) } };
    };
    expect((copies as MemoryCache & { [CHANGES]?: number })[CHANGES]).toBeUndefined();
    await getOrComputeWith(copies, 'k', OPTIONS, () => ({ n: 1 }));
    vi.advanceTimersByTime(30_001);
    let release: (value: { n: number }) => void = () => {};
    const held = new Promise<{ n: number }>((resolve) => {
      release = resolve;
    });
    const first = await getOrComputeWith(copies, 'k', OPTIONS, () => held);
    const second = await getOrComputeWith(copies, 'k', OPTIONS, () => held);
    const third = await getOrComputeWith(copies, 'k', OPTIONS, () => held);
    expect([first, second, third]).toEqual([{ n: 1 }, { n: 1 }, { n: 1 }]);
    expect(second).not.toBe(third);
    release({ n: 2 });
  });

  it('an lru that restarts TTLs on reads (updateAgeOnGet) has no count: every call reads', async () => {
    const lru = new LRUCache<string, never>({ max: 100, updateAgeOnGet: true }) as unknown as NonNullable<
      Parameters<typeof createMemoryCache>[0]
    >['lru'];
    const get = vi.spyOn(lru as NonNullable<typeof lru>, 'get');
    const cache = createMemoryCache({ lru });
    expect((cache as MemoryCache & { [CHANGES]?: number })[CHANGES]).toBeUndefined();
    const release = await staleDuringRefresh(cache);
    get.mockClear();
    for (let i = 0; i < 3; i++) await getOrComputeWith(cache, 'k', OPTIONS, () => 'filled');
    expect(get).toHaveBeenCalledTimes(3);
    release('new');
  });

  it('on the lru it makes, counts every direct call that reads or changes entries', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    const entry = { value: 1, createdAt: now, freshUntil: now + 1_000, staleUntil: now + 2_000 };
    const direct: [string, () => unknown][] = [
      ['set of a new key', () => cache.lru.set('x', entry)],
      ['get', () => cache.lru.get('x')],
      ['set with a new ttl', () => cache.lru.set('x', entry, { ttl: 1 })],
      ['has', () => cache.lru.has('x')],
      ['pop', () => cache.lru.pop()],
      ['purgeStale', () => cache.lru.purgeStale()],
    ];
    for (const [name, call] of direct) {
      const before = countOf(cache);
      call();
      expect(countOf(cache), name).toBeGreaterThan(before);
    }
    // What changes nothing is not counted.
    const before = countOf(cache);
    cache.lru.peek('x');
    [...cache.lru.keys()];
    expect(countOf(cache)).toBe(before);
  });
});
