import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  getOrCompute,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  onStampedeEvent,
  resetStats,
  stats,
} from '../src/index.js';
import { deferred, flush, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

describe.each([
  ['a synchronous cache', false],
  ['an asynchronous cache', true],
])('hit and miss on %s', (_label, async) => {
  it('returns a fresh value at once without calling the fill', async () => {
    const cache = testCache({ async });
    await getOrCompute(cache, 'k', 60_000, () => 'first');
    await flush(); // the write lands after the callers have their value
    const fill = vi.fn(() => 'second');
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('first');
    expect(fill).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ hits: 1, misses: 1, fills: 1 });
  });

  it('runs one fill for K = 10,000 concurrent callers: 1 fill, K-1 coalesced waits, same value', async () => {
    const cache = testCache({ async });
    const gate = deferred<{ n: number }>();
    const fill = vi.fn(() => gate.promise);
    const K = 10_000;
    const callers = Array.from({ length: K }, () => getOrCompute(cache, 'hot', 60_000, fill));
    await Promise.resolve();
    gate.resolve({ n: 7 });
    const values = await Promise.all(callers);
    expect(fill).toHaveBeenCalledTimes(1);
    const first = values[0];
    expect(first).toEqual({ n: 7 });
    for (const value of values) expect(value).toBe(first);
    expect(stats()).toMatchObject({ fills: 1, misses: K, coalescedWaits: K - 1, hits: 0 });
    expect(inFlightCount(cache)).toBe(0);
  });

  it('coalesces per (cache instance, key): two caches and two keys never share a fill', async () => {
    const a = testCache({ async });
    const b = testCache({ async });
    const fill = vi.fn(async () => 1);
    await Promise.all([
      getOrCompute(a, 'x', 1_000, fill),
      getOrCompute(a, 'x', 1_000, fill),
      getOrCompute(a, 'y', 1_000, fill),
      getOrCompute(b, 'x', 1_000, fill),
      getOrCompute(b, 'x', 1_000, fill),
    ]);
    expect(fill).toHaveBeenCalledTimes(3);
    expect(stats().coalescedWaits).toBe(2);
  });

  it('caches null, and returns undefined without caching it', async () => {
    const cache = testCache({ async });
    expect(await getOrCompute(cache, 'nothing', 60_000, () => null)).toBeNull();
    const again = vi.fn(() => 'other');
    expect(await getOrCompute(cache, 'nothing', 60_000, again)).toBeNull();
    expect(again).not.toHaveBeenCalled();

    expect(await getOrCompute(cache, 'void', 60_000, () => undefined)).toBeUndefined();
    expect(cache.backend.entries.has('void')).toBe(false);
    expect(await getOrCompute(cache, 'void', 60_000, () => 'now')).toBe('now');
  });
});

describe('expiry', () => {
  it('ttl undefined never expires', async () => {
    vi.useFakeTimers();
    const cache = testCache();
    await getOrCompute(cache, 'k', undefined, () => 'forever');
    vi.advanceTimersByTime(10 * 365 * 86_400_000);
    const fill = vi.fn(() => 'new');
    expect(await getOrCompute(cache, 'k', undefined, fill)).toBe('forever');
    expect(fill).not.toHaveBeenCalled();
  });

  it('a value is fresh within ttl and a miss after it', async () => {
    vi.useFakeTimers();
    const cache = testCache();
    await getOrCompute(cache, 'k', '30s', () => 1);
    vi.advanceTimersByTime(29_000);
    expect(await getOrCompute(cache, 'k', '30s', () => 2)).toBe(1);
    vi.advanceTimersByTime(1_500);
    expect(await getOrCompute(cache, 'k', '30s', () => 3)).toBe(3);
    expect(stats()).toMatchObject({ hits: 1, misses: 2, fills: 2 });
  });

  it('the K concurrent callers of an expired key record 1 fill and K-1 coalesced waits', async () => {
    vi.useFakeTimers();
    const cache = testCache();
    await getOrCompute(cache, 'k', 1_000, () => 'old');
    vi.advanceTimersByTime(2_000);
    resetStats();
    const fill = vi.fn(async () => 'new');
    const values = await Promise.all(
      Array.from({ length: 500 }, () => getOrCompute(cache, 'k', 1_000, fill)),
    );
    expect(new Set(values)).toEqual(new Set(['new']));
    expect(stats()).toMatchObject({ fills: 1, coalescedWaits: 499, misses: 500 });
    expect(await getValue(cache, 'k')).toBe('new');
  });
});

describe('the write', () => {
  it('lands after the callers hear; until it has, a new caller joins the settled flight', async () => {
    const cache = testCache({ async: true });
    const value = await getOrCompute(cache, 'k', 60_000, async () => 'v');
    expect(value).toBe('v');
    expect(inFlightCount(cache)).toBe(1);
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    expect(cache.backend.read('k')?.value).toBe('v');
  });

  it('that never settles delays no caller, is given up after 5 s and reported, and the next caller fills again', async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache();
    cache.set = () => new Promise<void>(() => {});
    const fill = vi.fn(async () => 'v');
    const first = getOrCompute(cache, 'k', 60_000, fill);
    const joined = getOrCompute(cache, 'k', 60_000, fill);
    await vi.advanceTimersByTimeAsync(0);
    expect(await first).toBe('v');
    expect(await joined).toBe('v');
    // While the write hangs the flight stays: a caller arriving now gets the value, no second fill.
    await vi.advanceTimersByTimeAsync(4_998);
    expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
    expect(inFlightCount(cache)).toBe(1);
    expect(stats().backendErrors).toBe(0);
    await vi.advanceTimersByTimeAsync(2);
    expect(stats().backendErrors).toBe(1);
    expect(inFlightCount(cache)).toBe(0);
    expect(fill).toHaveBeenCalledTimes(1);
    const again = getOrCompute(cache, 'k', 60_000, fill);
    await vi.advanceTimersByTimeAsync(0);
    expect(await again).toBe('v');
    expect(fill).toHaveBeenCalledTimes(2);
  });

  it('hands the rest of the fill (write, lock release) to waitUntil when the caller gives one', async () => {
    const cache = testCache({ async: true });
    const waitUntil = vi.fn();
    expect(await getOrComputeWith(cache, 'k', { ttl: 1_000, waitUntil }, () => 'v')).toBe('v');
    expect(waitUntil).toHaveBeenCalledTimes(1);
    await waitUntil.mock.calls[0]?.[0];
    expect(cache.backend.read('k')?.value).toBe('v');
  });

  it('warns once per cache when waitUntil throws (a method passed without its object), and the fill still answers and writes', async () => {
    // As workerd's ExecutionContext: `waitUntil` called without `this` throws "Illegal invocation".
    const ctx = {
      kept: [] as Promise<unknown>[],
      waitUntil(this: { kept: Promise<unknown>[] } | undefined, promise: Promise<unknown>) {
        if (this !== ctx)
          throw new TypeError('Illegal invocation: function called with incorrect `this` reference.');
        this.kept.push(promise);
      },
    };
    const warnings: string[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'warning') warnings.push(event.message);
    });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const cache = testCache({ async: true, name: 'unbound-wait-until' });
      const options = { ttl: 1_000, waitUntil: ctx.waitUntil };
      expect(await getOrComputeWith(cache, 'a', options, () => 'v')).toBe('v');
      expect(await getOrComputeWith(cache, 'b', options, () => 'w')).toBe('w');
      await flush();
      expect(cache.backend.read('a')?.value).toBe('v');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /^stampede: the waitUntil given to cache 'unbound-wait-until' threw \(Illegal invocation.*\): the work handed to it .* is not kept alive after the response\. Pass the platform's waitUntil bound to its object/,
      );
      // Bound, it is used and nothing is said.
      expect(
        await getOrComputeWith(cache, 'c', { ttl: 1_000, waitUntil: (p) => ctx.waitUntil(p) }, () => 'x'),
      ).toBe('x');
      expect(ctx.kept).toHaveLength(1);
      expect(warnings).toHaveLength(1);
    } finally {
      stop();
      warn.mockRestore();
    }
  });
});

describe('shared reads on an asynchronous cache', () => {
  it('concurrent callers share one backend read, hit or miss', async () => {
    const cache = testCache({ async: true });
    await getOrCompute(cache, 'k', 60_000, () => 'v');
    await flush(); // the write lands after the callers have their value
    cache.calls.get = 0;
    const hits = await Promise.all(
      Array.from({ length: 250 }, () => getOrCompute(cache, 'k', 60_000, () => 'x')),
    );
    expect(new Set(hits)).toEqual(new Set(['v']));
    expect(cache.calls.get).toBe(1);
    expect(stats().hits).toBe(250);

    cache.calls.get = 0;
    const fill = vi.fn(async () => 'cold');
    const cold = await Promise.all(
      Array.from({ length: 250 }, () => getOrCompute(cache, 'cold', 60_000, fill)),
    );
    expect(new Set(cold)).toEqual(new Set(['cold']));
    expect(cache.calls.get).toBe(1);
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('a read in flight before an invalidation is not shared with callers after it', async () => {
    const cache = testCache({ async: true });
    await getOrCompute(cache, 'k', 60_000, () => 'old');
    const before = getOrCompute(cache, 'k', 60_000, () => 'unused');
    await invalidate(cache, 'k');
    const after = getOrCompute(cache, 'k', 60_000, () => 'new');
    expect(await before).toBe('old');
    expect(await after).toBe('new');
  });
});
