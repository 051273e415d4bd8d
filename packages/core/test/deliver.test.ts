import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { roundTripValue } from '../src/adapter.js';
import {
  type Cache,
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

/** At 10 s (fake timers): `'k'` holds `'old'`, stale since 5 s and within its grace for an hour. */
function staleOldWithSlowWrites() {
  vi.useFakeTimers({ now: 10_000 });
  const slow = slowWrites();
  slow.cache.backend.write(
    'k',
    { value: 'old', createdAt: 0, freshUntil: 5_000, staleUntil: 3_600_000 },
    3_600_000,
  );
  return slow;
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

  it('is joined only while its value is fresh: past its freshUntil a caller fills again', async () => {
    vi.useFakeTimers({ now: 0 });
    const { cache, writes } = slowWrites();
    let fills = 0;
    const fill = async () => `v${++fills}`;
    expect(await getOrComputeWith(cache, 'k', { ttl: 10 }, fill)).toBe('v1');
    await vi.advanceTimersByTimeAsync(9);
    expect(await getOrCompute(cache, 'k', 10, fill)).toBe('v1');
    // At its freshUntil the value is no longer served as fresh, although its write is pending.
    await vi.advanceTimersByTimeAsync(1);
    const plain = getOrCompute(cache, 'k', 10, fill);
    const zero = getOrComputeWith(cache, 'k', { ttl: 0 }, fill);
    expect(await plain).toBe('v2');
    expect(await zero).toBe('v2');
    expect(fills).toBe(2);
    for (const write of writes) write.land();
    await flush();
  });

  it('a caller with grace arriving before it has landed gets the new value too, not the stale one', async () => {
    const { cache, writes } = staleOldWithSlowWrites();
    const fill = vi.fn(async () => 'new');
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('new');
    expect(writes).toHaveLength(1);
    const grace = { ttl: 60_000, staleWhileRevalidate: '1h' } as const;
    expect(await getOrComputeWith(cache, 'k', grace, fill)).toBe('new');
    // Past the value's own freshness the stale entry answers again, and a refresh starts.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await getOrComputeWith(cache, 'k', grace, fill)).toBe('old');
    expect(fill).toHaveBeenCalledTimes(2);
    for (const write of writes) write.land();
    await flush();
  });

  it('a caller with grace whose own checkValue refuses the new value keeps its stale hit', async () => {
    const { cache, writes } = staleOldWithSlowWrites();
    expect(await getOrCompute(cache, 'k', 60_000, async () => 123)).toBe(123);
    const strings = {
      ttl: 60_000,
      staleWhileRevalidate: '1h',
      checkValue: (value: unknown) => typeof value === 'string' || 'not a string',
    } as const;
    expect(await getOrComputeWith(cache, 'k', strings, async () => 'never')).toBe('old');
    expect(stats()).toMatchObject({ staleHits: 1, checkValueFailures: 0 });
    for (const write of writes) write.land();
    await flush();
  });

  it('a finished background refresh is joined only while its value is fresh', async () => {
    const { cache, writes } = staleOldWithSlowWrites();
    let fills = 0;
    const fill = async () => `v${++fills}`;
    // A stale read starts the refresh; its value (fresh for 10 ms) waits for its write.
    expect(await getOrComputeWith(cache, 'k', { ttl: 10, staleWhileRevalidate: '1h' }, fill)).toBe('old');
    await flush();
    expect(writes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(60);
    // Past that freshness a caller without grace fills again instead of taking the expired value.
    expect(await getOrCompute(cache, 'k', 10, fill)).toBe('v2');
    expect(fills).toBe(2);
    for (const write of writes) write.land();
    await flush();
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

describe('the value the callers of a fill get', () => {
  function textCache(): Cache & ReturnType<typeof testCache> {
    const cache = testCache({ async: true });
    // Stores what a JSON text cache would give back, as a remote adapter does.
    const set = cache.set.bind(cache);
    cache.set = (key, entry, options) => set(key, { ...entry, value: roundTripValue(entry.value) }, options);
    cache.roundTrip = vi.fn((value: unknown) => roundTripValue(value));
    return cache;
  }

  it('is what later hits return, on a cache that round-trips values (a Date comes back a string)', async () => {
    const cache = textCache();
    const at = new Date('2024-05-06T07:08:09.000Z');
    const value = { at, ratio: Number.NaN, tags: new Set(['a']) };
    const expected = { at: '2024-05-06T07:08:09.000Z', ratio: null, tags: {} };
    const [leader, joined] = await Promise.all([
      getOrCompute(cache, 'k', 60_000, () => value),
      getOrCompute(cache, 'k', 60_000, () => value),
    ]);
    expect(leader).toEqual(expected);
    expect(joined).toBe(leader);
    await flush();
    expect(await getOrCompute(cache, 'k', 60_000, () => value)).toEqual(expected);
    expect(cache.roundTrip).toHaveBeenCalledTimes(1);
  });

  it('is the fill value itself when the cache cannot carry it (and the write reports the fault)', async () => {
    const cache = textCache();
    const big = { n: 10n };
    expect(await getOrCompute(cache, 'k', 60_000, () => big)).toBe(big);
    await flush();
    expect(stats().backendErrors).toBe(1);
    expect(cache.backend.read('k')).toBeUndefined();
  });

  it('is the fill value itself (by reference) on a cache without roundTrip', async () => {
    const cache = testCache();
    const value = { at: new Date(0) };
    expect(await getOrCompute(cache, 'k', 60_000, () => value)).toBe(value);
    expect(await getOrCompute(cache, 'k', 60_000, () => ({}))).toBe(value);
  });

  it('is not round-tripped again when it came from another replica through the cache', async () => {
    vi.useFakeTimers({ now: 0 });
    const a = textCache();
    const b = testCache({ async: true, lock: true, backend: a.backend });
    b.roundTrip = vi.fn((value: unknown) => roundTripValue(value));
    const held = await b.tryAcquireFillLock?.('k', 10_000);
    const waiting = getOrComputeWith(b, 'k', { ttl: 60_000, distributedFillLock: true }, () => 'local');
    await a.set(
      'k',
      { value: 'remote', createdAt: 0, freshUntil: 60_000, staleUntil: 60_000 },
      { ttl: 60_000 },
    );
    await held?.release('filled');
    await vi.advanceTimersByTimeAsync(100);
    expect(await waiting).toBe('remote');
    expect(b.roundTrip).not.toHaveBeenCalled();
  });
});
