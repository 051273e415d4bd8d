import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheFillError,
  getOrCompute,
  getOrComputeWith,
  inFlightCount,
  isCacheFillError,
  resetStats,
  stats,
} from '../src/index.js';
import { deferred, settle, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A fill that never settles, and tells whether its signal aborted. */
function hungFill() {
  const seen: { signal?: AbortSignal } = {};
  const fill = (context: { signal: AbortSignal }) => {
    seen.signal = context.signal;
    return new Promise<string>(() => {});
  };
  return { fill, seen };
}

function timeoutOf(result: { ok: boolean; error?: unknown }): CacheFillError {
  expect(result.ok).toBe(false);
  expect(isCacheFillError(result.error)).toBe(true);
  const error = result.error as CacheFillError;
  expect(error.kind).toBe('timeout');
  return error;
}

describe("a caller that joins someone else's fill keeps its own limits", () => {
  it('its fillTimeout releases it from a fill started without one; the fill goes on for the others', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const leader = getOrComputeWith(cache, 'k', { ttl: 60_000 }, (ctx) => {
      fillSignal = ctx.signal;
      return gate.promise;
    });
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 100 }, () => 'unused'));
    let released = false;
    void joiner.then(() => {
      released = true;
    });
    await vi.advanceTimersByTimeAsync(99);
    expect(released).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const error = timeoutOf(await joiner);
    expect(error.key).toBe('k');
    expect(error.message).toMatch(/100ms/);
    expect(fillSignal?.aborted).toBe(false);
    expect(inFlightCount(cache)).toBe(1);
    await vi.advanceTimersByTimeAsync(900);
    gate.resolve('shared');
    expect(await leader).toBe('shared');
    expect(cache.backend.read('k')?.value).toBe('shared');
    expect(stats()).toMatchObject({ misses: 2, coalescedWaits: 1, fills: 1, fillTimeouts: 0 });
  });

  it('its fillTimeout releases it from a fill that never settles', async () => {
    const cache = testCache();
    const { fill, seen } = hungFill();
    const controller = new AbortController();
    const leader = settle(getOrComputeWith(cache, 'k', { signal: controller.signal }, fill));
    const joiner = settle(getOrComputeWith(cache, 'k', { fillTimeout: 100 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(100);
    timeoutOf(await joiner);
    expect(seen.signal?.aborted).toBe(false);
    controller.abort(new Error('leader left'));
    expect((await leader).ok).toBe(false);
    // Every caller has left: the fill is abandoned, its signal aborts, the key can be filled again.
    expect(seen.signal?.aborted).toBe(true);
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrCompute(cache, 'k', undefined, () => 'again')).toBe('again');
  });

  it('its fillTimeout applies when it is shorter than the leader’s', async () => {
    const cache = testCache();
    const { fill, seen } = hungFill();
    const leader = settle(getOrComputeWith(cache, 'k', { fillTimeout: 1_000 }, fill));
    await vi.advanceTimersByTimeAsync(50);
    const joiner = settle(getOrComputeWith(cache, 'k', { fillTimeout: 100 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(100);
    timeoutOf(await joiner);
    expect(seen.signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(850);
    timeoutOf(await leader);
    expect(seen.signal?.aborted).toBe(true);
    expect(stats()).toMatchObject({ fillTimeouts: 1 });
  });

  it("the flight's own fillTimeout releases a joiner whose limit ends later, without a timer of its own", async () => {
    const cache = testCache();
    const { fill } = hungFill();
    const leader = settle(getOrComputeWith(cache, 'k', { fillTimeout: 300 }, fill));
    await vi.advanceTimersByTimeAsync(100);
    const timers = vi.getTimerCount();
    const joiners = [
      settle(getOrComputeWith(cache, 'k', { fillTimeout: 300 }, () => 'unused')),
      settle(getOrComputeWith(cache, 'k', { fillTimeout: 250 }, () => 'unused')),
    ];
    expect(vi.getTimerCount()).toBe(timers);
    await vi.advanceTimersByTimeAsync(200);
    for (const result of [await leader, ...(await Promise.all(joiners))]) timeoutOf(result);
  });

  it('its own signal releases it from a fill that never settles and has no fillTimeout', async () => {
    const cache = testCache();
    const { fill, seen } = hungFill();
    void getOrComputeWith(cache, 'k', {}, fill);
    const controller = new AbortController();
    const joiner = settle(getOrComputeWith(cache, 'k', { signal: controller.signal }, () => 'unused'));
    controller.abort(new Error('left'));
    const result = await joiner;
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.message).toBe('left');
    expect(seen.signal?.aborted).toBe(false);
  });

  it('its fillTimeout releases it from a background refresh that never settles', async () => {
    const cache = testCache();
    const options = { ttl: 100, staleWhileRevalidate: 100 };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    await vi.advanceTimersByTimeAsync(150);
    const { fill } = hungFill();
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('old');
    // Past the grace the stale value is gone: the next caller joins the hung refresh.
    await vi.advanceTimersByTimeAsync(100);
    const joiner = settle(getOrComputeWith(cache, 'k', { ...options, fillTimeout: 100 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(100);
    timeoutOf(await joiner);
  });

  it('a limit beyond the timer range (2^31 - 1 ms) does not fire early', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', {}, () => gate.promise);
    const joiner = settle(getOrComputeWith(cache, 'k', { fillTimeout: '30d' }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(1_000);
    gate.resolve('v');
    expect(await joiner).toEqual({ ok: true, value: 'v' });
  });

  it('plain callers, and callers whose limit is the flight’s, share one promise (nothing per waiter)', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const options = { ttl: 60_000, fillTimeout: 5_000 };
    const first = getOrComputeWith(cache, 'k', options, () => gate.promise);
    const timers = vi.getTimerCount();
    const plain = Array.from({ length: 1_000 }, () => getOrCompute(cache, 'k', 60_000, () => 'unused'));
    const same = Array.from({ length: 1_000 }, () => getOrComputeWith(cache, 'k', options, () => 'unused'));
    expect(new Set([...plain, ...same]).size).toBe(1);
    expect(vi.getTimerCount()).toBe(timers);
    gate.resolve('v');
    expect(await first).toBe('v');
    expect(await Promise.all(plain)).toEqual(Array(1_000).fill('v'));
  });
});
