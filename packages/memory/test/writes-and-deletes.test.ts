import {
  type CacheEntry,
  getOrCompute,
  getOrComputeWith,
  getValue,
  invalidate,
  resetStats,
  setValue,
} from '@stampede/core';
import { LRUCache } from 'lru-cache';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

function entry(value: unknown, createdAt: number, freshFor = 60_000): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + freshFor, staleUntil: createdAt + freshFor };
}

function gate<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('setValue with an expired ttl takes effect (memory)', () => {
  it('ttl 0 removes the old value: the next read is a miss', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'old', { ttl: '1m' });
    vi.advanceTimersByTime(10);
    await setValue(cache, 'k', 'new', { ttl: 0 });
    expect(await getValue(cache, 'k')).toBeUndefined();
    expect(cache.get('k')).toBeUndefined();
    expect(await getOrCompute(cache, 'k', '1m', () => 'filled')).toBe('filled');
  });

  it('ttl 0 in the same millisecond as the old write still removes it', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'old', { ttl: '1m' });
    await setValue(cache, 'k', 'new', { ttl: 0 });
    expect(await getValue(cache, 'k')).toBeUndefined();
  });

  it('ttl 0 with a grace stores the value stale, as written', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'old', { ttl: '1m' });
    vi.advanceTimersByTime(10);
    await setValue(cache, 'k', 'new', { ttl: 0, staleWhileRevalidate: '1m' });
    expect(await getValue(cache, 'k')).toBeUndefined();
    expect(await getValue(cache, 'k', { allowStale: true })).toBe('new');
  });

  it('an entry already past its staleUntil removes the old value', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    cache.set('k', entry('old', now - 100), { ttl: 60_000 });
    const expired = { value: 'new', createdAt: now - 50, freshUntil: now - 10, staleUntil: now - 5 };
    cache.set('k', expired, { ttl: 60_000 });
    expect(cache.get('k')).toBeUndefined();
  });

  it('an expired write leaves a newer entry alone', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    cache.set('k', entry('newer', now), { ttl: 60_000 });
    cache.set('k', entry('older', now - 10, 0), { ttl: 0 });
    expect(cache.get('k')?.value).toBe('newer');
  });

  it('a fill with ttl 0 answers its caller and leaves the key a miss', async () => {
    const cache = createMemoryCache();
    expect(await getOrCompute(cache, 'k', 0, () => 'once')).toBe('once');
    expect(cache.size).toBe(0);
  });
});

describe("the memory adapter's own delete and clear during a fill (memory)", () => {
  it('delete() during a fill is not undone when the fill writes back', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'v1', { ttl: '1s' });
    vi.advanceTimersByTime(1_000);
    const fill = gate<string>();
    const refilling = getOrCompute(cache, 'k', '1m', () => fill.promise);
    vi.advanceTimersByTime(5);
    cache.delete('k');
    fill.resolve('computed before the delete');
    expect(await refilling).toBe('computed before the delete');
    expect(cache.get('k')).toBeUndefined();
    expect(await getValue(cache, 'k')).toBeUndefined();
  });

  it('clear() during a fill is not undone when the fill writes back', async () => {
    const cache = createMemoryCache();
    const fill = gate<string>();
    const filling = getOrCompute(cache, 'k', '1m', () => fill.promise);
    vi.advanceTimersByTime(5);
    cache.clear();
    fill.resolve('computed before the clear');
    expect(await filling).toBe('computed before the clear');
    expect(cache.get('k')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('a fill that started after the delete writes as usual', async () => {
    const cache = createMemoryCache();
    cache.delete('k');
    vi.advanceTimersByTime(1);
    expect(await getOrCompute(cache, 'k', '1m', () => 'fresh')).toBe('fresh');
    expect(cache.get('k')?.value).toBe('fresh');
    cache.clear();
    vi.advanceTimersByTime(1);
    expect(await getOrCompute(cache, 'k', '1m', () => 'after clear')).toBe('after clear');
    expect(cache.get('k')?.value).toBe('after clear');
  });

  it('ties go to the write: delete then set in the same millisecond stores', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'old', { ttl: '1m' });
    cache.delete('k');
    await setValue(cache, 'k', 'new', { ttl: '1m' });
    expect(await getValue(cache, 'k')).toBe('new');
    cache.clear();
    await setValue(cache, 'k', 'after clear', { ttl: '1m' });
    expect(await getValue(cache, 'k')).toBe('after clear');
    await invalidate(cache, 'k');
    await setValue(cache, 'k', 'after invalidate', { ttl: '1m' });
    expect(await getValue(cache, 'k')).toBe('after invalidate');
  });

  it('a write older than a delete is refused; a newer one is not', () => {
    const cache = createMemoryCache();
    const before = Date.now();
    vi.advanceTimersByTime(10);
    cache.delete('k');
    cache.set('k', entry('started before', before), { ttl: 60_000 });
    expect(cache.get('k')).toBeUndefined();
    cache.set('k', entry('started at the delete', Date.now()), { ttl: 60_000 });
    expect(cache.get('k')?.value).toBe('started at the delete');
  });

  it('a deletion record pushed out of its bound still refuses older fills', () => {
    const cache = createMemoryCache({ max: 2 });
    const before = Date.now();
    vi.advanceTimersByTime(10);
    cache.delete('a');
    cache.delete('b');
    cache.delete('c');
    cache.set('a', entry('started before the delete', before), { ttl: 60_000 });
    expect(cache.get('a')).toBeUndefined();
    cache.set('a', entry('started after', Date.now()), { ttl: 60_000 });
    expect(cache.get('a')?.value).toBe('started after');
  });

  it('keeps as many deletion records as the LRUCache it was given (or the default)', () => {
    const owned = new LRUCache<string, CacheEntry>({ maxSize: 100, sizeCalculation: () => 1 });
    const cache = createMemoryCache({ lru: owned });
    const before = Date.now();
    vi.advanceTimersByTime(10);
    cache.delete('k');
    cache.set('k', entry('started before', before), { ttl: 60_000 });
    expect(cache.get('k')).toBeUndefined();
  });

  it('an SWR refresh that started before a delete does not bring the key back', async () => {
    const cache = createMemoryCache();
    const options = { ttl: '1s', staleWhileRevalidate: '1m' } as const;
    await getOrComputeWith(cache, 'k', options, () => 'v1');
    vi.advanceTimersByTime(1_500);
    const refresh = gate<string>();
    expect(await getOrComputeWith(cache, 'k', options, () => refresh.promise)).toBe('v1');
    vi.advanceTimersByTime(5);
    cache.delete('k');
    refresh.resolve('v2');
    await vi.advanceTimersByTimeAsync(0);
    expect(cache.get('k')).toBeUndefined();
  });
});

describe("set answers whether it stored the write (what a tiered cache's L1 follows)", () => {
  it('true when stored or when an expired write removed the value; false when refused', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    expect(cache.set('k', entry('a', now), { ttl: 60_000 })).toBe(true);
    expect(cache.set('k', entry('older', now - 1), { ttl: 60_000 })).toBe(false);
    expect(cache.get('k')?.value).toBe('a');
    cache.delete('k');
    expect(cache.set('k', entry('fill before the delete', now - 1), { ttl: 60_000 })).toBe(false);
    expect(cache.set('k', entry('direct', now - 1), { ttl: 60_000, direct: true })).toBe(true);
    expect(cache.set('k', entry('expired', now), { ttl: 0 })).toBe(true);
    expect(cache.get('k')).toBeUndefined();
  });
});
