import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  type Cache,
  configure,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  invalidateTag,
  resetStats,
  setValue,
  stats,
} from '../src/index.js';
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

describe('stale reads of a process-local cache while its refresh runs', () => {
  // Writes 'v1', lets it go stale, and starts a held refresh with one stale read.
  async function refreshing(cache: ReturnType<typeof testCache>, tags?: string[]) {
    await getOrComputeWith(cache, 'k', { ...SWR, tags }, () => 'v1');
    vi.advanceTimersByTime(31_000);
    const gate = deferred<string>();
    const refresh = vi.fn(() => gate.promise);
    expect(await getOrComputeWith(cache, 'k', SWR, refresh)).toBe('v1');
    expect(refresh).toHaveBeenCalledTimes(1);
    return { gate, refresh };
  }

  it('are served the entry the refresh started from, without reading the cache again', async () => {
    const local = testCache({ processLocal: true });
    const { gate } = await refreshing(local);
    const readsBefore = local.calls.get;
    const fill = vi.fn(() => 'unused');
    const served = await Promise.all(
      Array.from({ length: 50 }, () => getOrComputeWith(local, 'k', SWR, fill)),
    );
    expect(new Set(served)).toEqual(new Set(['v1']));
    expect(local.calls.get - readsBefore).toBe(0);
    expect(fill).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ staleHits: 51, backgroundRefreshes: 1 });
    gate.resolve('v2');
    await flush();
    expect(await getOrComputeWith(local, 'k', SWR, fill)).toBe('v2');
  });

  it('a cache another process may change is read on every stale read', async () => {
    const shared = testCache();
    const { gate } = await refreshing(shared);
    const readsBefore = shared.calls.get;
    await Promise.all(Array.from({ length: 50 }, () => getOrComputeWith(shared, 'k', SWR, () => 'unused')));
    expect(shared.calls.get - readsBefore).toBe(50);
    gate.resolve('v2');
    await flush();
  });

  it('after invalidate or setValue of the key, readers no longer get the stale entry', async () => {
    const local = testCache({ processLocal: true });
    const first = await refreshing(local);
    await invalidate(local, 'k');
    expect(await getOrComputeWith(local, 'k', SWR, () => 'after-invalidate')).toBe('after-invalidate');
    first.gate.resolve('late');
    await flush();

    const other = testCache({ processLocal: true });
    const second = await refreshing(other);
    await setValue(other, 'k', 'set', SWR);
    expect(await getOrComputeWith(other, 'k', SWR, () => 'unused')).toBe('set');
    second.gate.resolve('late');
    await flush();
  });

  it('after an invalidation of a tag the stale entry carries and the refresh does not, readers no longer get it', async () => {
    const local = testCache({ processLocal: true, tags: true });
    // The stale entry carries 'b'; the refresh (the readers' options) would write 'a'.
    await getOrComputeWith(local, 'k', { ...SWR, tags: ['b'] }, () => 'v1');
    vi.advanceTimersByTime(31_000);
    const gate = deferred<string>();
    const withA = { ...SWR, tags: ['a'] };
    expect(await getOrComputeWith(local, 'k', withA, () => gate.promise)).toBe('v1');
    vi.advanceTimersByTime(1);
    await invalidateTag(local, 'b');
    const after = getOrComputeWith(local, 'k', withA, () => 'refilled');
    gate.resolve('v2');
    expect(await after).not.toBe('v1');
    await flush();
  });

  it('at the exact end of the grace the stale entry is not served: the reader waits for the refresh', async () => {
    const local = testCache({ processLocal: true });
    const written = Date.now();
    const { gate } = await refreshing(local);
    vi.setSystemTime(written + 30_000 + 300_000 - 1);
    expect(await getOrComputeWith(local, 'k', SWR, () => 'unused')).toBe('v1');
    vi.setSystemTime(written + 30_000 + 300_000);
    const atEnd = getOrComputeWith(local, 'k', SWR, () => 'unused');
    gate.resolve('v2');
    expect(await atEnd).toBe('v2');
  });

  it('a reader without stale-while-revalidate does not get the stale entry: it waits for the refresh', async () => {
    const local = testCache({ processLocal: true });
    const { gate } = await refreshing(local);
    const strict = getOrComputeWith(local, 'k', { ttl: '30s' }, () => 'unused');
    gate.resolve('v2');
    expect(await strict).toBe('v2');
  });

  it("a refresh started by a checked reader serves no one its schema's output unread", async () => {
    const local = testCache({ processLocal: true });
    await getOrComputeWith(local, 'k', SWR, () => 'v1');
    vi.advanceTimersByTime(31_000);
    const gate = deferred<string>();
    const upper = z.string().transform((text) => text.toUpperCase());
    expect(await getOrComputeWith(local, 'k', { ...SWR, checkValue: upper }, () => gate.promise)).toBe('V1');
    expect(await getOrComputeWith(local, 'k', SWR, () => 'unused')).toBe('v1');
    gate.resolve('v2');
    await flush();
  });

  // A read in flight (an asynchronous cache, or an asynchronous check) may predate a change made
  // meanwhile: the refresh it starts reads the cache on every stale read.
  it.each([
    ['invalidate', (cache: Cache) => invalidate(cache, 'k'), 'v2'],
    ['setValue', (cache: Cache) => setValue(cache, 'k', 'set', SWR), 'set'],
    ['invalidateTag', (cache: Cache) => invalidateTag(cache, 't'), 'v2'],
  ])(
    'a refresh started by a read that was in flight during %s serves nothing unread',
    async (_name, change, expected) => {
      const local = testCache({ processLocal: true, async: true, tags: true });
      const tagged = { ...SWR, tags: ['t'] };
      await getOrComputeWith(local, 'k', tagged, () => 'v1');
      vi.advanceTimersByTime(31_000);
      const gate = deferred<string>();
      const early = getOrComputeWith(local, 'k', tagged, () => gate.promise);
      vi.advanceTimersByTime(1);
      await change(local);
      await early;
      const after = getOrComputeWith(local, 'k', tagged, () => 'unused');
      gate.resolve('v2');
      expect(await after).toBe(expected);
      await flush();
    },
  );

  it('a refresh started after an asynchronous check, when another refresh has written meanwhile, serves nothing unread', async () => {
    const local = testCache({ processLocal: true });
    await getOrComputeWith(local, 'k', SWR, () => 'v1');
    vi.advanceTimersByTime(31_000);
    const first = deferred<string>();
    expect(await getOrComputeWith(local, 'k', SWR, () => first.promise)).toBe('v1');
    const checkGate = deferred<void>();
    const slowCheck = {
      ...SWR,
      checkValue: z.string().refine(async () => {
        await checkGate.promise;
        return true;
      }),
    };
    const second = deferred<string>();
    const checked = getOrComputeWith(local, 'k', slowCheck, () => second.promise);
    first.resolve('v2');
    await flush();
    expect(local.backend.read('k')?.value).toBe('v2');
    checkGate.resolve();
    expect(await checked).toBe('v1'); // its read came before v2
    expect(await getOrComputeWith(local, 'k', SWR, () => 'unused')).toBe('v2');
    second.resolve('v3');
    await flush();
  });

  it('once the refresh has written, readers read the cache even before its write resolves', async () => {
    const local = testCache({ processLocal: true });
    const write = local.set.bind(local);
    let slowWrites = false;
    local.set = (key, entry, options) => {
      write(key, entry, options);
      return slowWrites ? new Promise<void>((resolve) => setTimeout(resolve, 50)) : undefined;
    };
    await getOrComputeWith(local, 'k', SWR, () => 'v1');
    vi.advanceTimersByTime(31_000);
    slowWrites = true;
    const gate = deferred<string>();
    expect(await getOrComputeWith(local, 'k', SWR, () => gate.promise)).toBe('v1');
    gate.resolve('v2');
    await flush();
    expect(local.backend.read('k')?.value).toBe('v2');
    expect(inFlightCount(local)).toBe(1); // its write has not resolved
    expect(await getOrComputeWith(local, 'k', SWR, () => 'unused')).toBe('v2');
    await vi.advanceTimersByTimeAsync(50);
  });

  it('a reader with checkValue still checks the entry', async () => {
    const local = testCache({ processLocal: true });
    const { gate } = await refreshing(local);
    // 'v1' is not a number: the checked reader does not get it, and waits for the refresh.
    const checked = getOrComputeWith(
      local,
      'k',
      { ...SWR, checkValue: z.union([z.number(), z.literal('v2')]) },
      () => 2,
    );
    gate.resolve('v2');
    expect(await checked).toBe('v2');
  });
});
