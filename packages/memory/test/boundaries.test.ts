import { getOrCompute, getOrComputeWith, getValue, resetStats, setValue, stats } from '@stampede/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

// The exact instants: an entry is fresh while now < freshUntil and servable stale while
// now < staleUntil. Each case checks that the adapter still holds the entry at that instant, so the
// answer comes from the freshness rule and not from the backend having dropped it.

const START = 10_000_000;

beforeEach(() => {
  vi.useFakeTimers({ now: START });
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('freshness at the exact boundaries', () => {
  it('at exactly freshUntil the value is no longer fresh', async () => {
    const cache = createMemoryCache();
    let fills = 0;
    await getOrCompute(cache, 'k', 100, () => ++fills);
    vi.setSystemTime(START + 99);
    expect(await getOrCompute(cache, 'k', 100, () => ++fills)).toBe(1);
    vi.setSystemTime(START + 100);
    expect(cache.get('k')?.value).toBe(1);
    expect(await getOrCompute(cache, 'k', 100, () => ++fills)).toBe(2);
  });

  it('one millisecond before staleUntil the value is served stale; at exactly staleUntil it is a miss', async () => {
    const options = { ttl: 100, staleWhileRevalidate: 50 };
    const before = createMemoryCache();
    await setValue(before, 'k', 'old', options);
    vi.setSystemTime(START + 149);
    expect(await getOrComputeWith(before, 'k', options, () => 'refreshed')).toBe('old');
    expect(stats()).toMatchObject({ staleHits: 1, backgroundRefreshes: 1, misses: 0 });
    await vi.runAllTimersAsync();

    resetStats();
    vi.setSystemTime(START);
    const at = createMemoryCache();
    await setValue(at, 'k', 'old', options);
    vi.setSystemTime(START + 150);
    // lru-cache drops an entry only once its age exceeds the physical ttl: it is still held here.
    expect(at.get('k')?.value).toBe('old');
    expect(await getOrComputeWith(at, 'k', options, () => 'new')).toBe('new');
    expect(stats()).toMatchObject({ staleHits: 0, misses: 1, fills: 1 });
  });

  it('getValue returns a value inside its grace window only with allowStale', async () => {
    const cache = createMemoryCache();
    await setValue(cache, 'k', 'v', { ttl: 100, staleWhileRevalidate: 50 });
    vi.setSystemTime(START + 99);
    expect(await getValue(cache, 'k')).toBe('v');
    vi.setSystemTime(START + 100);
    expect(cache.get('k')?.value).toBe('v');
    expect(await getValue(cache, 'k')).toBeUndefined();
    expect(await getValue(cache, 'k', { allowStale: true })).toBe('v');
    vi.setSystemTime(START + 149);
    expect(await getValue(cache, 'k', { allowStale: true })).toBe('v');
    vi.setSystemTime(START + 150);
    expect(cache.get('k')?.value).toBe('v');
    expect(await getValue(cache, 'k', { allowStale: true })).toBeUndefined();
  });
});
