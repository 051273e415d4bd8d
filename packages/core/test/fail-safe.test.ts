import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { activeBackgroundRefreshes } from '../src/background.js';
import type { CacheEntry } from '../src/cache.js';
import {
  type CacheFillError,
  configure,
  type GetOrComputeOptions,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  isCacheFillError,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  type StampedeStats,
  setValue,
  stats,
} from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';

const T0 = 1_000_000;
const TTL = 10_000;
const MAX_STALE = 60_000;
const THROTTLE = 30_000;
const FS: GetOrComputeOptions = { ttl: TTL, failSafe: { maxStale: MAX_STALE, throttle: THROTTLE } };

let events: StampedeEvent[] = [];
let off: () => void = () => {};

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T0 });
  events = [];
  off = onStampedeEvent((event) => {
    if (event.type === 'fail-safe' || event.type === 'soft-timeout') events.push(event);
  });
});
afterEach(() => {
  off();
  configure({ maxBackgroundRefreshes: 64 });
  vi.useRealTimers();
});

const failing = (message = 'db down') =>
  vi.fn((): never => {
    throw new Error(message);
  });

function failure(result: { ok: true; value: unknown } | { ok: false; error: unknown }): CacheFillError {
  if (result.ok) throw new Error(`expected a failure, got ${String(result.value)}`);
  expect(isCacheFillError(result.error)).toBe(true);
  return result.error as CacheFillError;
}

/** The identities fail-safe adds to the counters (stats.ts, 7 and 8), with the old ones it touches. */
function expectIdentities(s: StampedeStats): void {
  expect(s.failSafeActivations).toBeLessThanOrEqual(s.fillFailures + s.fillTimeouts);
  expect(s.softTimeouts).toBeLessThanOrEqual(s.misses - s.coalescedWaits);
  expect(s.misses - s.coalescedWaits + s.backgroundRefreshes).toBe(
    s.fills + s.lockWaitHits + s.fillsCancelled,
  );
}

describe('fail-safe: a failing fill answers with the previous value', () => {
  it('every caller of the failed fill gets the previous value; it is re-armed fresh for throttle', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', FS, () => 'v1')).toBe('v1');
    const firstEntry = cache.backend.read('k');
    vi.advanceTimersByTime(TTL + 5_000);

    const fill = failing();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => settle(getOrComputeWith(cache, 'k', FS, fill))),
    );
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ ok: true, value: 'v1' })));
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ fills: 2, fillFailures: 1, coalescedWaits: 4, failSafeActivations: 1 });
    expect(events).toEqual([
      { type: 'fail-safe', cache: 'test', key: 'k', reason: 'error', staleMs: 5_000, background: false },
    ]);
    // Re-armed: the same value, createdAt and fill time, fresh for throttle, kept until maxStale runs out.
    const rearmed = cache.backend.entries.get('k');
    expect(rearmed?.entry).toEqual({
      value: 'v1',
      createdAt: firstEntry?.createdAt,
      delta: firstEntry?.delta,
      freshUntil: Date.now() + THROTTLE,
      staleUntil: Date.now() + THROTTLE,
    });
    expect(rearmed?.expiresAt).toBe(T0 + TTL + MAX_STALE);
    expect(inFlightCount(cache)).toBe(0);
    expectIdentities(stats());
  });

  it('the re-arm tells the cache which entry it renews (the one read), so a remote keeps its createdAt exactly', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', FS, () => 'v1')).toBe('v1');
    vi.advanceTimersByTime(TTL + 1);
    const read = cache.backend.read('k');
    const set = vi.spyOn(cache, 'set');
    expect(await getOrComputeWith(cache, 'k', FS, failing())).toBe('v1');
    await flush();
    expect(set).toHaveBeenCalledTimes(1);
    const [, written, options] = set.mock.calls[0] ?? [];
    expect(options?.renews).toBe(read);
    expect(written?.createdAt).toBe(read?.createdAt);
    // A fill's write renews nothing.
    vi.advanceTimersByTime(THROTTLE + 1);
    expect(await getOrComputeWith(cache, 'k', FS, () => 'v2')).toBe('v2');
    await flush();
    expect(set.mock.calls[1]?.[2]).toEqual({ ttl: TTL + MAX_STALE });
  });

  it('without a previous value the callers get the error, with the original cause for every one', async () => {
    const cache = testCache();
    const cause = new Error('db down');
    const fill = vi.fn(() => Promise.reject(cause));
    const [leader, ...joiners] = await Promise.all(
      Array.from({ length: 3 }, () => settle(getOrComputeWith(cache, 'k', FS, fill))),
    );
    expect(failure(leader as never).kind).toBe('fill');
    expect(failure(leader as never).cause).toBe(cause);
    for (const joiner of joiners) {
      expect(failure(joiner as never).kind).toBe('fill_failed');
      expect(failure(joiner as never).cause).toBe(cause);
    }
    expect(cache.calls.set).toBe(0);
    expect(stats().failSafeActivations).toBe(0);
    expect(events).toEqual([]);
  });

  it('without failSafe an expired value is gone (physical ttl = ttl) and the fill error stands', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', { ttl: TTL }, () => 'v1');
    expect(cache.backend.entries.get('k')?.expiresAt).toBe(T0 + TTL);
    vi.advanceTimersByTime(TTL);
    expect(failure(await settle(getOrComputeWith(cache, 'k', { ttl: TTL }, failing()))).kind).toBe('fill');

    // An expired entry still physically there (written with failSafe) is not used by a call without it.
    await getOrComputeWith(cache, 'j', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    expect(failure(await settle(getOrComputeWith(cache, 'j', { ttl: TTL }, failing()))).kind).toBe('fill');
    expect(stats().failSafeActivations).toBe(0);
  });

  it('with failSafe entries are kept physically for ttl + max(grace, maxStale)', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'a', FS, () => 1);
    await getOrComputeWith(cache, 'b', { ...FS, staleWhileRevalidate: MAX_STALE * 2 }, () => 1);
    await getOrComputeWith(cache, 'c', { ttl: TTL, failSafe: true }, () => 1);
    expect(cache.backend.entries.get('a')?.expiresAt).toBe(T0 + TTL + MAX_STALE);
    expect(cache.backend.entries.get('b')?.expiresAt).toBe(T0 + TTL + MAX_STALE * 2);
    // Defaults: maxStale 1 day.
    expect(cache.backend.entries.get('c')?.expiresAt).toBe(T0 + TTL + 86_400_000);
    // The envelope's own times do not change: past ttl it is a miss, not a stale hit.
    expect(cache.backend.entries.get('a')?.entry.staleUntil).toBe(T0 + TTL);
  });

  it('throttle: inside it no fill is tried (hits on the re-armed value); after it the source is tried again', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const fill = failing();
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('v1');
    expect(fill).toHaveBeenCalledTimes(1);

    vi.advanceTimersByTime(THROTTLE - 1);
    for (let i = 0; i < 10; i++) expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('v1');
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats().hits).toBe(10);

    vi.advanceTimersByTime(1);
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('v1');
    expect(fill).toHaveBeenCalledTimes(2);
    expect(stats().failSafeActivations).toBe(2);

    // The source is back: the next try after the throttle gets (and caches) the fresh value.
    vi.advanceTimersByTime(THROTTLE);
    expect(await getOrComputeWith(cache, 'k', FS, () => 'v2')).toBe('v2');
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('v2');
    expect(cache.backend.read('k')?.createdAt).toBe(Date.now());
    expectIdentities(stats());
  });

  it('maxStale boundary: a value answers until maxStale past its freshness and not a millisecond after', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'in', FS, () => 'old');
    await getOrComputeWith(cache, 'out', FS, () => 'old');
    vi.advanceTimersByTime(TTL + MAX_STALE - 1);
    expect(await getOrComputeWith(cache, 'in', FS, failing())).toBe('old');
    // Re-armed, but never past the limit: fresh for 1 ms here, not for the whole throttle.
    expect(cache.backend.read('in')?.freshUntil).toBe(T0 + TTL + MAX_STALE);
    vi.advanceTimersByTime(1);
    expect(failure(await settle(getOrComputeWith(cache, 'out', FS, failing()))).kind).toBe('fill');
    expect(failure(await settle(getOrComputeWith(cache, 'in', FS, failing()))).kind).toBe('fill');
    expect(stats().failSafeActivations).toBe(1);
  });

  it('re-arming never stretches maxStale: the limit counts from the fill that produced the value', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'old');
    const fill = failing();
    // Fails at ttl, at ttl + throttle: each time re-armed, but the limit stays T0 + ttl + maxStale.
    vi.advanceTimersByTime(TTL);
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('old');
    vi.advanceTimersByTime(THROTTLE);
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('old');
    expect(cache.backend.read('k')?.freshUntil).toBe(T0 + TTL + MAX_STALE);
    vi.advanceTimersByTime(THROTTLE);
    expect(Date.now()).toBe(T0 + TTL + MAX_STALE);
    expect(failure(await settle(getOrComputeWith(cache, 'k', FS, fill))).kind).toBe('fill');
    expect(fill).toHaveBeenCalledTimes(3);
    expect(stats().failSafeActivations).toBe(2);
  });

  it("a failed fill answers with another replica's newer value, found by the confirming read", async () => {
    const backend = new Backend();
    const a = testCache({ backend, name: 'a' });
    const b = testCache({ backend, name: 'b' });
    await getOrComputeWith(a, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const slowFailure = deferred<string>();
    const failed = getOrComputeWith(a, 'k', FS, () => slowFailure.promise);
    vi.advanceTimersByTime(100);
    // Replica b fills successfully meanwhile.
    expect(await getOrComputeWith(b, 'k', FS, () => 'v2')).toBe('v2');
    const v2 = backend.read('k');
    slowFailure.reject(new Error('db down'));
    expect(await failed).toBe('v2');
    await flush();
    // v2 is what gets re-armed (fresh for throttle, its own createdAt).
    expect(backend.read('k')).toEqual({
      ...v2,
      freshUntil: Date.now() + THROTTLE,
      staleUntil: Date.now() + THROTTLE,
    });
    expect(await getOrComputeWith(a, 'k', FS, failing())).toBe('v2');
  });

  it('a re-arm never replaces a newer value: a real fill started after the previous value wins', async () => {
    const backend = new Backend();
    const a = testCache({ backend, name: 'a' });
    await getOrComputeWith(a, 'k', FS, () => 'v1');
    const v1 = backend.read('k');
    vi.advanceTimersByTime(TTL);
    // The confirming read finds v1; another replica's v2 (started later) lands before the re-arm.
    const get = a.get;
    a.get = (key) => {
      const found = get(key);
      if (a.calls.get === 3) {
        backend.write(
          'k',
          { value: 'v2', createdAt: Date.now(), freshUntil: Date.now() + 1, staleUntil: Date.now() + 1 },
          1_000,
        );
      }
      return found;
    };
    expect(await getOrComputeWith(a, 'k', FS, failing())).toBe('v1');
    expect(v1?.createdAt).toBeLessThan(Date.now());
    expect(backend.read('k')?.value).toBe('v2');
  });
});

describe('fail-safe and timeouts', () => {
  it('hard timeout (fillTimeout): every caller gets the previous value; the fill is aborted; re-armed', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    let signal: AbortSignal | undefined;
    const hang = vi.fn((ctx: { signal: AbortSignal }) => {
      signal = ctx.signal;
      return new Promise<string>(() => {});
    });
    const options = { ...FS, fillTimeout: 1_000 };
    const calls = Array.from({ length: 3 }, () => settle(getOrComputeWith(cache, 'k', options, hang)));
    await vi.advanceTimersByTimeAsync(999);
    expect(signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    for (const call of calls) expect(await call).toEqual({ ok: true, value: 'v1' });
    expect(signal?.aborted).toBe(true);
    expect(hang).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ fillTimeouts: 1, failSafeActivations: 1 });
    expect(events).toMatchObject([{ type: 'fail-safe', reason: 'timeout' }]);
    expect(cache.backend.read('k')?.freshUntil).toBe(Date.now() + THROTTLE);
    expect(inFlightCount(cache)).toBe(0);
    expectIdentities(stats());
  });

  it('hard timeout without a previous value: kind timeout, as without fail-safe', async () => {
    const cache = testCache();
    const call = settle(
      getOrComputeWith(cache, 'k', { ...FS, fillTimeout: 100 }, () => new Promise(() => {})),
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(failure(await call).kind).toBe('timeout');
    expect(stats().failSafeActivations).toBe(0);
  });

  it('soft timeout: callers get the previous value; the fill goes on in the background and its value lands', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const slow = vi.fn(() => gate.promise);
    const options = { ...FS, softTimeout: 200, fillTimeout: 5_000 };
    const calls = Array.from({ length: 3 }, () => settle(getOrComputeWith(cache, 'k', options, slow)));
    let answered = 0;
    for (const call of calls) void call.then(() => answered++);
    await vi.advanceTimersByTimeAsync(199);
    expect(answered).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    for (const call of calls) expect(await call).toEqual({ ok: true, value: 'v1' });
    expect(stats().softTimeouts).toBe(1);
    expect(events).toEqual([{ type: 'soft-timeout', cache: 'test', key: 'k', durationMs: 200 }]);
    // The fill runs on, holding a background-refresh slot; a caller arriving now gets v1 at once.
    expect(activeBackgroundRefreshes()).toBe(1);
    expect(await getOrComputeWith(cache, 'k', options, slow)).toBe('v1');
    expect(slow).toHaveBeenCalledTimes(1);

    await vi.advanceTimersByTimeAsync(1_000);
    gate.resolve('v2');
    await flush();
    expect(activeBackgroundRefreshes()).toBe(0);
    expect(inFlightCount(cache)).toBe(0);
    expect(cache.backend.read('k')?.value).toBe('v2');
    expect(await getOrComputeWith(cache, 'k', options, slow)).toBe('v2');
    expect(slow).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ softTimeouts: 1, failSafeActivations: 0, fillFailures: 0 });
    expectIdentities(stats());
  });

  it('soft timeout, then the fill fails: re-armed (counted as a fail-safe activation), callers already answered', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const call = getOrComputeWith(cache, 'k', { ...FS, softTimeout: 200 }, () => gate.promise);
    await vi.advanceTimersByTimeAsync(200);
    expect(await call).toBe('v1');
    gate.reject(new Error('db down'));
    await flush();
    expect(stats()).toMatchObject({ softTimeouts: 1, fillFailures: 1, failSafeActivations: 1 });
    expect(events.map((e) => e.type)).toEqual(['soft-timeout', 'fail-safe']);
    expect(events[1]).toMatchObject({ background: true });
    expect(cache.backend.read('k')?.freshUntil).toBe(Date.now() + THROTTLE);
    expect(activeBackgroundRefreshes()).toBe(0);
  });

  it('soft timeout, then the hard timeout bounds the background fill (aborted, re-armed, slot returned)', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    let signal: AbortSignal | undefined;
    const call = getOrComputeWith(cache, 'k', { ...FS, softTimeout: 200, fillTimeout: 1_000 }, (ctx) => {
      signal = ctx.signal;
      return new Promise<string>(() => {});
    });
    await vi.advanceTimersByTimeAsync(200);
    expect(await call).toBe('v1');
    expect(activeBackgroundRefreshes()).toBe(1);
    await vi.advanceTimersByTimeAsync(800);
    expect(signal?.aborted).toBe(true);
    expect(activeBackgroundRefreshes()).toBe(0);
    expect(inFlightCount(cache)).toBe(0);
    expect(stats()).toMatchObject({ softTimeouts: 1, fillTimeouts: 1, failSafeActivations: 1 });
  });

  it('soft timeout with the refresh cap reached, or without a previous value: callers wait for the fill', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    configure({ maxBackgroundRefreshes: 0 });
    const gate = deferred<string>();
    const options = { ...FS, softTimeout: 200 };
    const capped = settle(getOrComputeWith(cache, 'k', options, () => gate.promise));
    const gate2 = deferred<string>();
    const cold = settle(getOrComputeWith(cache, 'cold', options, () => gate2.promise));
    let answered = 0;
    void capped.then(() => answered++);
    void cold.then(() => answered++);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(answered).toBe(0);
    gate.resolve('v2');
    gate2.resolve('c');
    expect(await capped).toEqual({ ok: true, value: 'v2' });
    expect(await cold).toEqual({ ok: true, value: 'c' });
    expect(stats().softTimeouts).toBe(0);
  });
});

describe('fail-safe and callers leaving', () => {
  it('a caller that aborts leaves with its reason; the others still get the previous value', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const leaves = new AbortController();
    const leaving = settle(
      getOrComputeWith(cache, 'k', { ...FS, signal: leaves.signal }, () => gate.promise),
    );
    const staying = settle(getOrComputeWith(cache, 'k', FS, () => 'unused'));
    leaves.abort(new Error('client gone'));
    expect(await leaving).toEqual({ ok: false, error: new Error('client gone') });
    gate.reject(new Error('db down'));
    expect(await staying).toEqual({ ok: true, value: 'v1' });
    expect(stats().failSafeActivations).toBe(1);
  });

  it('every caller aborting abandons the fill: no fail-safe activation, nothing re-armed', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const leaves = new AbortController();
    let signal: AbortSignal | undefined;
    const call = settle(
      getOrComputeWith(cache, 'k', { ...FS, signal: leaves.signal }, (ctx) => {
        signal = ctx.signal;
        return new Promise<string>(() => {});
      }),
    );
    const sets = cache.calls.set;
    leaves.abort(new Error('client gone'));
    expect(await call).toEqual({ ok: false, error: new Error('client gone') });
    expect(signal?.aborted).toBe(true);
    expect(stats().failSafeActivations).toBe(0);
    expect(cache.calls.set).toBe(sets);
  });
});

describe('fail-safe with stale-while-revalidate', () => {
  const SWR: GetOrComputeOptions = { ...FS, staleWhileRevalidate: 20_000 };

  it('a failing background refresh re-arms the stale value, so no refresh is retried within throttle', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'v1');
    vi.advanceTimersByTime(TTL + 1);
    const refresh = failing();
    expect(await getOrComputeWith(cache, 'k', SWR, refresh)).toBe('v1');
    await flush();
    expect(refresh).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({
      staleHits: 1,
      backgroundRefreshes: 1,
      backgroundRefreshFailures: 1,
      failSafeActivations: 1,
    });
    expect(events).toMatchObject([{ type: 'fail-safe', reason: 'error', background: true, staleMs: 1 }]);
    // Re-armed: fresh for throttle, then its grace again (within maxStale).
    const entry = cache.backend.read('k');
    expect(entry?.freshUntil).toBe(Date.now() + THROTTLE);
    expect(entry?.staleUntil).toBe(Date.now() + THROTTLE + 20_000);
    vi.advanceTimersByTime(THROTTLE - 1);
    expect(await getOrComputeWith(cache, 'k', SWR, refresh)).toBe('v1');
    expect(refresh).toHaveBeenCalledTimes(1);
    expect(stats().hits).toBe(1);
  });

  it('without failSafe a failing refresh keeps the stale value and the next stale read refreshes again', async () => {
    const cache = testCache();
    const plain = { ttl: TTL, staleWhileRevalidate: 20_000 };
    await getOrComputeWith(cache, 'k', plain, () => 'v1');
    vi.advanceTimersByTime(TTL + 1);
    const refresh = failing();
    expect(await getOrComputeWith(cache, 'k', plain, refresh)).toBe('v1');
    await flush();
    expect(await getOrComputeWith(cache, 'k', plain, refresh)).toBe('v1');
    await flush();
    expect(refresh).toHaveBeenCalledTimes(2);
    expect(stats().failSafeActivations).toBe(0);
  });

  it('a background refresh is never soft-timed-out: it has no callers to answer', async () => {
    const cache = testCache();
    const options: GetOrComputeOptions = { ...FS, staleWhileRevalidate: 20_000, softTimeout: 100 };
    await getOrComputeWith(cache, 'k', options, () => 'v1');
    vi.advanceTimersByTime(TTL + 1);
    const slow = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', options, () => slow.promise)).toBe('v1');
    expect(activeBackgroundRefreshes()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    // One slot, the refresh's own; no soft timeout counted or armed for it.
    expect(activeBackgroundRefreshes()).toBe(1);
    expect(stats().softTimeouts).toBe(0);
    slow.resolve('v2');
    await flush();
    expect(activeBackgroundRefreshes()).toBe(0);
  });

  it("a re-armed value's grace never runs past maxStale", async () => {
    const cache = testCache();
    // A grace longer than what maxStale leaves: the re-arm's grace is cut at maxStale's end.
    const long: GetOrComputeOptions = { ...FS, staleWhileRevalidate: '1h' };
    await getOrComputeWith(cache, 'k', long, () => 'v1');
    const limit = T0 + TTL + MAX_STALE;
    vi.advanceTimersByTime(TTL + MAX_STALE - THROTTLE / 2);
    expect(await getOrComputeWith(cache, 'k', long, failing())).toBe('v1');
    await flush();
    expect(cache.backend.read('k')).toMatchObject({ freshUntil: limit, staleUntil: limit });
    // Past maxStale the value is no stale hit: a miss whose failing fill finds nothing to fall back on.
    vi.setSystemTime(limit + 1);
    expect(failure(await settle(getOrComputeWith(cache, 'k', long, failing())))).toMatchObject({
      kind: 'fill',
    });
  });

  it('past the grace but within maxStale: a miss whose failing fill falls back on the value', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', SWR, () => 'v1');
    vi.advanceTimersByTime(TTL + 20_000);
    expect(await getOrComputeWith(cache, 'k', SWR, failing())).toBe('v1');
    expect(stats()).toMatchObject({ misses: 2, staleHits: 0, failSafeActivations: 1 });
  });
});

describe('fail-safe never brings an invalidated key back', () => {
  it('invalidated before the fill: a miss with no previous value, the error stands', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    await invalidate(cache, 'k');
    expect(failure(await settle(getOrComputeWith(cache, 'k', FS, failing()))).kind).toBe('fill');
  });

  it('invalidated while the fill runs: its callers get the error, and nothing is re-armed', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const leader = settle(getOrComputeWith(cache, 'k', FS, () => gate.promise));
    const joiner = settle(getOrComputeWith(cache, 'k', FS, () => 'unused'));
    await invalidate(cache, 'k');
    gate.reject(new Error('db down'));
    expect(failure(await leader).kind).toBe('fill');
    expect(failure(await joiner).kind).toBe('fill_failed');
    await flush();
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats().failSafeActivations).toBe(0);
  });

  it('invalidated while the fill runs, and the confirming read fails: still the error, nothing re-armed', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const leader = settle(getOrComputeWith(cache, 'k', FS, () => gate.promise));
    // Invalidated on this process (the confirming read cannot say so: it fails).
    await invalidate(cache, 'k');
    const get = cache.get;
    cache.get = (key) => {
      throw new Error(`redis down (${key})`);
    };
    gate.reject(new Error('db down'));
    expect(failure(await leader).kind).toBe('fill');
    cache.get = get;
    await flush();
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats().failSafeActivations).toBe(0);
  });

  it('invalidated while a soft-timed-out fill runs on: its failure re-arms nothing', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const call = getOrComputeWith(cache, 'k', { ...FS, softTimeout: 100 }, () => gate.promise);
    await vi.advanceTimersByTimeAsync(100);
    expect(await call).toBe('v1');
    await invalidate(cache, 'k');
    gate.reject(new Error('db down'));
    await flush();
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats()).toMatchObject({ softTimeouts: 1, failSafeActivations: 0 });
  });

  it('a read already in flight when the key is invalidated does not hand its old entry to fail-safe', async () => {
    // Reads the backend when called and answers a tick later: the invalidation lands in between.
    const cache = testCache({ async: true });
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    await flush();
    vi.advanceTimersByTime(TTL);
    const call = settle(getOrComputeWith(cache, 'k', FS, failing()));
    const invalidated = invalidate(cache, 'k');
    expect(failure(await call).kind).toBe('fill');
    await invalidated;
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats().failSafeActivations).toBe(0);
  });
});

// A shared cache stores an entry's times on its server's clock and converts them back through an
// estimate of the offset: an entry may read back a few ms before this process dated it.
function readsEarlier<C extends ReturnType<typeof testCache>>(cache: C, ms: number): C {
  const get = cache.get;
  cache.get = (key) => {
    const entry = get(key) as CacheEntry | undefined;
    if (entry === undefined) return undefined;
    const { createdAt, freshUntil, staleUntil } = entry;
    return { ...entry, createdAt: createdAt - ms, freshUntil: freshUntil - ms, staleUntil: staleUntil - ms };
  };
  return cache;
}

describe("fail-safe and this process's own changes, on a cache whose times read back a few ms early", () => {
  it('the value a setValue here wrote is the fallback (it is no older than the change)', async () => {
    const cache = readsEarlier(testCache(), 3);
    await setValue(cache, 'k', 'v1', { ttl: TTL, staleWhileRevalidate: MAX_STALE });
    vi.advanceTimersByTime(TTL + 1);
    expect(await getOrComputeWith(cache, 'k', FS, failing())).toBe('v1');
    expect(stats()).toMatchObject({ failSafeActivations: 1 });
  });

  it('a value filled just after an invalidation here is the fallback', async () => {
    const cache = readsEarlier(testCache(), 3);
    await getOrComputeWith(cache, 'k', FS, () => 'v0');
    await invalidate(cache, 'k');
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    expect(await getOrComputeWith(cache, 'k', FS, failing())).toBe('v1');
    expect(stats()).toMatchObject({ fills: 3, failSafeActivations: 1 });
  });

  it("the confirming read fails: this process's record of the change judges the value read at the miss", async () => {
    const cache = readsEarlier(testCache(), 3);
    await setValue(cache, 'k', 'v1', { ttl: TTL, staleWhileRevalidate: MAX_STALE });
    vi.advanceTimersByTime(TTL + 1);
    const get = cache.get;
    // The first read (the miss's) answers; the confirming one fails.
    cache.get = (key) => {
      if (cache.calls.get >= 1) throw new Error('redis down');
      return get(key);
    };
    // The read at the miss and the change are a few ms apart by the cache's dates; without the
    // confirming read, only this process's own record of the change can judge, and it refuses.
    expect(failure(await settle(getOrComputeWith(cache, 'k', FS, failing()))).kind).toBe('fill');
    expect(stats()).toMatchObject({ failSafeActivations: 0, backendErrors: 1 });
  });

  it('a delete here not landed yet when the confirming read ran: the old value is no fallback', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<void>();
    const remove = cache.delete;
    cache.delete = async (key) => {
      await gate.promise;
      return remove(key);
    };
    const invalidated = invalidate(cache, 'k');
    // Both reads (the miss's and the confirming one) find the entry the delete has not removed yet.
    expect(failure(await settle(getOrComputeWith(cache, 'k', FS, failing()))).kind).toBe('fill');
    gate.resolve();
    await invalidated;
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats().failSafeActivations).toBe(0);
  });
});

describe('fail-safe confirms its fallback with one more read', () => {
  it('a key invalidated on another replica while the fill ran: the error, nothing re-armed', async () => {
    const backend = new Backend();
    const a = testCache({ backend, name: 'a' });
    const b = testCache({ backend, name: 'b' });
    await getOrComputeWith(a, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const call = settle(getOrComputeWith(a, 'k', FS, () => gate.promise));
    vi.advanceTimersByTime(5);
    await invalidate(b, 'k');
    gate.reject(new Error('db down'));
    expect(failure(await call).kind).toBe('fill');
    expect(backend.read('k')).toBeUndefined();
    expect(stats().failSafeActivations).toBe(0);
  });

  it('a cache that fails the confirming read leaves the value read at the miss (both down: still an answer)', async () => {
    const cache = testCache();
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    vi.advanceTimersByTime(TTL);
    const get = cache.get;
    cache.get = (key) => {
      if (cache.calls.get >= 2) throw new Error('redis down');
      return get(key);
    };
    expect(await getOrComputeWith(cache, 'k', FS, failing())).toBe('v1');
    expect(stats()).toMatchObject({ failSafeActivations: 1, backendErrors: 1 });
  });

  it('a confirming read slower than 250 ms: the value read at the miss, at 250 ms', async () => {
    const cache = testCache({ async: true });
    await getOrComputeWith(cache, 'k', FS, () => 'v1');
    await flush();
    vi.advanceTimersByTime(TTL);
    const get = cache.get;
    cache.get = (key) => (cache.calls.get >= 2 ? new Promise(() => {}) : get(key));
    const call = settle(getOrComputeWith(cache, 'k', FS, failing()));
    let answered = false;
    void call.then(() => {
      answered = true;
    });
    await vi.advanceTimersByTimeAsync(249);
    expect(answered).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await call).toEqual({ ok: true, value: 'v1' });
    expect(stats()).toMatchObject({ failSafeActivations: 1, backendErrors: 1 });
  });
});

describe('fail-safe across replicas with the lock', () => {
  it('the replica whose fill failed re-arms before releasing the lock: the waiting replica takes the value, no fill', async () => {
    const backend = new Backend();
    const a = testCache({ backend, name: 'a', lock: true, push: true, async: true });
    const b = testCache({ backend, name: 'b', lock: true, push: true, async: true });
    const options = { ...FS, distributedFillLock: true };
    await getOrComputeWith(a, 'k', options, () => 'v1');
    await flush();
    vi.advanceTimersByTime(TTL);
    const gate = deferred<string>();
    const fromA = getOrComputeWith(a, 'k', options, () => gate.promise);
    await flush();
    const fillB = vi.fn(() => 'from b');
    const fromB = getOrComputeWith(b, 'k', options, fillB);
    await vi.advanceTimersByTimeAsync(100);
    expect(stats().lockContended).toBe(1);
    gate.reject(new Error('db down'));
    expect(await fromA).toBe('v1');
    expect(await fromB).toBe('v1');
    expect(fillB).not.toHaveBeenCalled();
    expect(a.calls.release).toEqual(['filled', 'filled']);
    expect(stats()).toMatchObject({ failSafeActivations: 1, lockWaitHits: 1 });
    // Both hit the re-armed value until the throttle ends.
    vi.advanceTimersByTime(THROTTLE - 1);
    expect(await getOrComputeWith(b, 'k', options, fillB)).toBe('v1');
    expect(fillB).not.toHaveBeenCalled();
  });
});

describe('fail-safe options', () => {
  const cache = testCache();
  const fill = () => 'v';

  it.each([
    [{ failSafe: 'yes' }, new TypeError('options.failSafe must be a boolean or an object; got string')],
    [{ failSafe: null }, new TypeError('options.failSafe must be a boolean or an object; got null')],
    [{ failSafe: { maxStale: -1 } }, /options\.failSafe\.maxStale/],
    [{ failSafe: { maxStale: 'soon' } }, /options\.failSafe\.maxStale/],
    [{ failSafe: { throttle: 0 } }, /options\.failSafe\.throttle must be at least 1ms/],
    [{ failSafe: { throttle: {} } }, /options\.failSafe\.throttle/],
    [{ failSafe: true, softTimeout: 0 }, /options\.softTimeout must be at least 1ms/],
    [{ softTimeout: '1s' }, /options\.softTimeout needs options\.failSafe/],
  ])('rejects %o before any I/O', async (options, expected) => {
    const before = cache.calls.get;
    await expect(
      getOrComputeWith(cache, 'k', { ttl: 1_000, ...(options as GetOrComputeOptions) }, fill),
    ).rejects.toThrow(expected);
    expect(cache.calls.get).toBe(before);
  });

  it('accepts true, false and partial objects', async () => {
    const accepted: GetOrComputeOptions['failSafe'][] = [
      true,
      false,
      {},
      { maxStale: '1h' },
      { throttle: '5s' },
    ];
    for (const failSafe of accepted) {
      expect(await getOrComputeWith(cache, 'ok', { ttl: 1_000, failSafe }, fill)).toBe('v');
    }
  });
});
