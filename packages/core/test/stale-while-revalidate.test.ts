import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { configure, getOrComputeWith, inFlightCount, resetStats, stats } from '../src/index.js';
import { deferred, flush, testCache } from './helpers.js';

const SWR = { ttl: '30s', staleWhileRevalidate: '5m' } as const;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  configure({ maxBackgroundRefreshes: 64 });
  vi.useRealTimers();
});

describe('stale-while-revalidate', () => {
  it('within ttl: fresh; in the grace: the last value at once and one background refresh; past it: a cold miss', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'v1');

    vi.advanceTimersByTime(29_000);
    const fill = vi.fn(() => 'unused');
    expect(await getOrComputeWith(cache, 'k', SWR, fill)).toBe('v1');
    expect(fill).not.toHaveBeenCalled();

    vi.advanceTimersByTime(2_000);
    const gate = deferred<string>();
    const refresh = vi.fn(() => gate.promise);
    const stale = await Promise.all(
      Array.from({ length: 100 }, () => getOrComputeWith(cache, 'k', SWR, refresh)),
    );
    expect(new Set(stale)).toEqual(new Set(['v1']));
    expect(refresh).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ staleHits: 100, backgroundRefreshes: 1, fills: 2 });
    gate.resolve('v2');
    await flush();
    expect(await getOrComputeWith(cache, 'k', SWR, fill)).toBe('v2');
    expect(inFlightCount(cache)).toBe(0);

    vi.advanceTimersByTime(30_000 + 300_000 + 1);
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'v3')).toBe('v3');
    expect(stats().misses).toBe(2);
  });

  it('a stale read never waits for the refresh, and the refresh gets the stale value', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'old');
    vi.advanceTimersByTime(31_000);
    let seen: unknown;
    const gate = deferred<string>();
    const started = getOrComputeWith(cache, 'k', SWR, (ctx) => {
      seen = { stale: ctx.stale, background: ctx.background };
      return gate.promise;
    });
    expect(await started).toBe('old');
    expect(seen).toEqual({ stale: 'old', background: true });
    gate.resolve('new');
    await flush();
  });

  it('a failing refresh keeps the stale value and is counted; the next stale read retries', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'good');
    vi.advanceTimersByTime(31_000);
    expect(
      await getOrComputeWith(cache, 'k', SWR, () => {
        throw new Error('db down');
      }),
    ).toBe('good');
    await flush();
    expect(stats()).toMatchObject({ backgroundRefreshFailures: 1, fillFailures: 1 });
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'better')).toBe('good');
    await flush();
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('better');
  });

  it('a process-wide cap bounds concurrent refreshes; a key over the cap retries on its next stale read', async () => {
    configure({ maxBackgroundRefreshes: 2 });
    const cache = testCache();
    for (const key of ['a', 'b', 'c']) await getOrComputeWith(cache, key, SWR, () => `${key}1`);
    vi.advanceTimersByTime(31_000);
    const gates = new Map<string, ReturnType<typeof deferred<string>>>();
    const fill = vi.fn((ctx: { key: string }) => {
      const gate = deferred<string>();
      gates.set(ctx.key, gate);
      return gate.promise;
    });
    for (const key of ['a', 'b', 'c']) expect(await getOrComputeWith(cache, key, SWR, fill)).toBe(`${key}1`);
    expect(fill).toHaveBeenCalledTimes(2);
    expect(stats()).toMatchObject({ backgroundRefreshes: 2, backgroundRefreshesSkipped: 1 });
    gates.get('a')?.resolve('a2');
    await flush();
    expect(await getOrComputeWith(cache, 'c', SWR, fill)).toBe('c1');
    expect(fill).toHaveBeenCalledTimes(3);
    expect([...gates.keys()]).toEqual(['a', 'b', 'c']);
  });

  it('no ttl + SWR: fresh forever, never refreshed', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', { staleWhileRevalidate: '1m' }, () => 'forever');
    vi.advanceTimersByTime(365 * 86_400_000);
    const fill = vi.fn(() => 'new');
    expect(await getOrComputeWith(cache, 'k', { staleWhileRevalidate: '1m' }, fill)).toBe('forever');
    expect(fill).not.toHaveBeenCalled();
    expect(stats().backgroundRefreshes).toBe(0);
  });

  it('stores ttl + grace as the physical TTL, and freshness in the envelope', async () => {
    const cache = testCache();
    const set = vi.spyOn(cache, 'set');
    await getOrComputeWith(cache, 'k', SWR, () => 1);
    const [, entry, options] = set.mock.calls[0] ?? [];
    expect(options).toEqual({ ttl: 330_000 });
    expect(entry?.freshUntil).toBe(Date.now() + 30_000);
    expect(entry?.staleUntil).toBe(Date.now() + 330_000);
  });

  it('hands the refresh to waitUntil so it outlives the request', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 1);
    vi.advanceTimersByTime(31_000);
    const waitUntil = vi.fn();
    await getOrComputeWith(cache, 'k', { ...SWR, waitUntil }, () => 2);
    expect(waitUntil).toHaveBeenCalledTimes(1);
    await waitUntil.mock.calls[0]?.[0];
    expect(cache.backend.read('k')?.value).toBe(2);
  });

  it('a caller without SWR treats the stale entry as a miss', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'old');
    vi.advanceTimersByTime(31_000);
    expect(await getOrComputeWith(cache, 'k', { ttl: '30s' }, () => 'fresh')).toBe('fresh');
  });
});
