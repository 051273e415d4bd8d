import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheEntry,
  type CacheSetOptions,
  getOrCompute,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  resetStats,
  stats,
} from '../src/index.js';
import { deferred, flush, settle, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A test cache whose writes land only when the test says so (a slow backend). */
function slowWrites(options: Parameters<typeof testCache>[0] = {}) {
  const cache = testCache({ async: true, ...options });
  const inner = cache.set.bind(cache);
  const writes: { key: string; land: () => void }[] = [];
  cache.set = (key: string, entry: CacheEntry, setOptions: CacheSetOptions) => {
    const landed = deferred<void>();
    writes.push({
      key,
      land: () => {
        void Promise.resolve(inner(key, entry, setOptions)).then(() => landed.resolve());
      },
    });
    return landed.promise;
  };
  return { cache, writes };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a slow backend write', () => {
  it('delays no caller: every caller of the fill has the value when the fill ends', async () => {
    vi.useFakeTimers({ now: 0 });
    const { cache, writes } = slowWrites();
    const fill = vi.fn(async () => {
      await sleep(50);
      return 'v';
    });
    const leader = settle(getOrCompute(cache, 'k', 60_000, fill));
    const joined = settle(getOrCompute(cache, 'k', 60_000, fill));
    await vi.advanceTimersByTimeAsync(50);
    expect(writes).toHaveLength(1);
    expect(cache.backend.read('k')).toBeUndefined();
    expect(await leader).toEqual({ ok: true, value: 'v' });
    expect(await joined).toEqual({ ok: true, value: 'v' });
    expect(Date.now()).toBe(50);
    writes[0]?.land();
    await flush();
    expect(cache.backend.read('k')?.value).toBe('v');
  });

  it('a caller arriving while it is in flight joins the flight: no read, no second fill', async () => {
    const { cache, writes } = slowWrites();
    const fill = vi.fn(async () => 'v');
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
    const readsBefore = cache.calls.get;
    expect(inFlightCount(cache)).toBe(1);
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000, staleWhileRevalidate: 1_000 }, fill)).toBe('v');
    expect(fill).toHaveBeenCalledTimes(1);
    // The plain call joins without reading; the SWR call reads first (and misses), then joins.
    expect(cache.calls.get).toBe(readsBefore + 1);
    expect(stats()).toMatchObject({ fills: 1, misses: 3, coalescedWaits: 2, hits: 0 });
    writes[0]?.land();
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
    expect(stats().hits).toBe(1);
  });

  it('releases the lock only once it has landed, so a waiting replica finds the value', async () => {
    const { cache, writes } = slowWrites({ lock: true });
    const value = await getOrComputeWith(cache, 'k', { ttl: 60_000, distributedFillLock: true }, () => 'v');
    expect(value).toBe('v');
    await flush();
    expect(cache.calls.release).toEqual([]);
    expect(cache.backend.locks.size).toBe(1);
    writes[0]?.land();
    await flush();
    expect(cache.calls.release).toEqual(['filled']);
    expect(cache.backend.read('k')?.value).toBe('v');
    expect(inFlightCount(cache)).toBe(0);
  });

  it('an invalidation while it is in flight: callers after it start a new fill', async () => {
    const { cache, writes } = slowWrites();
    expect(await getOrCompute(cache, 'k', 60_000, () => 'old')).toBe('old');
    const invalidated = invalidate(cache, 'k');
    expect(inFlightCount(cache)).toBe(0);
    await invalidated;
    const next = getOrCompute(cache, 'k', 60_000, () => 'new');
    await flush();
    for (const write of writes) write.land();
    expect(await next).toBe('new');
  });

  it('a background refresh keeps its flight (and its refresh slot) until its write has landed', async () => {
    vi.useFakeTimers({ now: 0 });
    const { cache, writes } = slowWrites();
    const options = { ttl: 1_000, staleWhileRevalidate: 60_000 };
    const first = getOrComputeWith(cache, 'k', options, () => 1);
    await vi.advanceTimersByTimeAsync(0);
    writes[0]?.land();
    expect(await first).toBe(1);
    await flush();
    vi.setSystemTime(2_000);
    const refresh = vi.fn(() => 2);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe(1);
    await flush();
    expect(refresh).toHaveBeenCalledTimes(1);
    expect(inFlightCount(cache)).toBe(1);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe(1);
    expect(refresh).toHaveBeenCalledTimes(1);
    writes[1]?.land();
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe(2);
  });
});
