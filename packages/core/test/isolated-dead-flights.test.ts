import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { WRITE_GUARD_MS } from '../src/backend.js';
import { activeBackgroundRefreshes } from '../src/background.js';
import {
  type CacheFillError,
  configure,
  getOrComputeWith,
  inFlightCount,
  isCacheFillError,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  stats,
} from '../src/index.js';
import { HEARTBEAT_MS, SILENT_FLIGHT_MS } from '../src/isolated-flights.js';
import { deferred, settle, testCache } from './helpers.js';

// On workerd (`isolatedRequests`) a fill runs in the context of the request that started it. When
// that request has answered and no waitUntil keeps its work alive, workerd ends the context: the
// fill never settles and none of that context's timers fire again. Requests that joined it watch it
// from their own timers. Here a request's end is simulated by stopping the one interval timer the
// flight arms in its own context (its heartbeat), and the fill never settling.

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 0 });
  configure({ isolatedRequests: true });
});
afterEach(() => {
  configure({ isolatedRequests: false });
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/**
 * The context of the next flight started: `end()` ends it as workerd ends a request, stopping the
 * heartbeat timer the flight arms there (the only interval timer a fill without the lock arms).
 */
function nextFlightsRequest(): { end(): void } {
  const realSetInterval = globalThis.setInterval;
  let id: ReturnType<typeof setInterval> | undefined;
  const spy = vi.spyOn(globalThis, 'setInterval').mockImplementationOnce(((
    callback: () => void,
    ms: number,
  ) => {
    id = realSetInterval(callback, ms);
    return id;
  }) as typeof setInterval);
  return {
    end() {
      spy.mockRestore();
      clearInterval(id);
    },
  };
}

const never = (): Promise<string> => new Promise<string>(() => {});

/** The error of a call that must have failed. */
function failure(result: { ok: true; value: unknown } | { ok: false; error: unknown }): CacheFillError {
  if (result.ok) throw new Error(`expected a failure, got ${String(result.value)}`);
  expect(isCacheFillError(result.error)).toBe(true);
  return result.error as CacheFillError;
}

/** Records whether `promise` has settled yet. */
function watch<T>(promise: Promise<T>): { readonly done: boolean } {
  const state = { done: false };
  void promise.then(
    () => {
      state.done = true;
    },
    () => {
      state.done = true;
    },
  );
  return state;
}

describe('a fill whose request is gone does not hold its key (isolated runtimes)', () => {
  it('the leader leaves and its request ends: the joiner stops waiting within the silence bound, and the next call fills afresh', async () => {
    const cache = testCache();
    const request = nextFlightsRequest();
    const leaves = new AbortController();
    const leader = settle(
      getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaves.signal, waitUntil: () => {} }, never),
    );
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    const joinerState = watch(joiner);
    await vi.advanceTimersByTimeAsync(200);
    leaves.abort(new Error('leader went away'));
    expect((await leader).ok).toBe(false);
    // The leader's request answers and ends; its waitUntil kept nothing alive past it.
    request.end();
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS - HEARTBEAT_MS - 50);
    expect(joinerState.done).toBe(false);
    await vi.advanceTimersByTimeAsync(HEARTBEAT_MS + 100);
    const error = failure(await joiner);
    expect(error.kind).toBe('timeout');
    expect(error.message).toMatch(/request that runs it is gone/);
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'second')).toBe('second');
    expect(stats()).toMatchObject({ fills: 2, fillTimeouts: 1 });
  });

  it('a flight found silent for the bound is given up after one timer turn: the call fills afresh instead of joining it', async () => {
    const cache = testCache();
    const request = nextFlightsRequest();
    void getOrComputeWith(cache, 'k', { ttl: 60_000 }, never);
    request.end();
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS + 1);
    // Nobody watched it meanwhile: the flight is still registered until a call looks at it.
    expect(inFlightCount(cache)).toBe(1);
    // Silence alone may be a busy isolate's: the call lets one timer turn pass, and the heartbeat
    // stays silent.
    const call = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'fresh');
    await vi.advanceTimersByTimeAsync(1);
    expect(await call).toBe('fresh');
    expect(inFlightCount(cache)).toBe(0);
    expect(stats()).toMatchObject({ fills: 2, coalescedWaits: 0 });
  });

  it('once the callers of the request running the fill have all left (no waitUntil), a later call starts its own fill; the watchers keep watching', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leaves = new AbortController();
    const leader = settle(
      getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaves.signal }, () => gate.promise),
    );
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(50);
    leaves.abort(new Error('leader went away'));
    expect((await leader).ok).toBe(false);
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'own')).toBe('own');
    // The first fill was alive after all: its watcher still gets its value.
    gate.resolve('first');
    await vi.advanceTimersByTimeAsync(10);
    expect(await joiner).toEqual({ ok: true, value: 'first' });
    expect(stats().fills).toBe(2);
  });

  it('with waitUntil the fill outlives its leader: later calls join it (one fill)', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leaves = new AbortController();
    const options = { ttl: 60_000, waitUntil: () => {} };
    const leader = settle(
      getOrComputeWith(cache, 'k', { ...options, signal: leaves.signal }, () => gate.promise),
    );
    const joiner = settle(getOrComputeWith(cache, 'k', options, () => 'unused'));
    await vi.advanceTimersByTimeAsync(50);
    leaves.abort(new Error('leader went away'));
    expect((await leader).ok).toBe(false);
    const later = settle(getOrComputeWith(cache, 'k', options, () => 'unused'));
    await vi.advanceTimersByTimeAsync(5_000);
    gate.resolve('v');
    await vi.advanceTimersByTimeAsync(10);
    expect(await joiner).toEqual({ ok: true, value: 'v' });
    expect(await later).toEqual({ ok: true, value: 'v' });
    expect(stats().fills).toBe(1);
  });

  it('a slow fill whose request is alive is never cut short: the bound is on silence, not on duration', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leader = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => gate.promise));
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(inFlightCount(cache)).toBe(1);
    expect(await getOrComputeWith(cache, 'other', { ttl: 60_000 }, () => 'x')).toBe('x');
    gate.resolve('slow');
    await vi.advanceTimersByTimeAsync(10);
    expect(await leader).toEqual({ ok: true, value: 'slow' });
    expect(await joiner).toEqual({ ok: true, value: 'slow' });
    expect(stats()).toMatchObject({ fills: 2, fillTimeouts: 0 });
  });
});

describe('a busy isolate is not a gone request (isolated runtimes)', () => {
  // A blocked event loop, for real: fake timers move the clock and every timer together.
  const busyFor = (ms: number): void => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      // A long synchronous stretch: no timer runs.
    }
  };

  it('a call right after a long synchronous stretch joins the live fill rather than fill beside it', async () => {
    vi.useRealTimers();
    const cache = testCache();
    const slow = deferred<string>();
    let fills = 0;
    const first = getOrComputeWith(cache, 'k', { ttl: 60_000, waitUntil: () => {} }, () => {
      fills++;
      return slow.promise;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    busyFor(SILENT_FLIGHT_MS + 200);
    const second = settle(
      getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => {
        fills++;
        return 'beside';
      }),
    );
    // The heartbeat, due first, runs before the call's timer turn: the flight is alive.
    await new Promise((resolve) => setTimeout(resolve, 5));
    slow.resolve('first');
    expect(await first).toBe('first');
    expect(await second).toEqual({ ok: true, value: 'first' });
    expect(fills).toBe(1);
    expect(stats()).toMatchObject({ fills: 1, fillTimeouts: 0 });
  });

  it("a watcher whose own timer ran late does not reap: the flight's fillTimeout decides, counted once", async () => {
    vi.useRealTimers();
    const cache = testCache();
    const leader = settle(getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 300 }, never));
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'beside'));
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Past the fillTimeout and the watcher's 1 s of grace after it, before any timer could run.
    busyFor(1_400);
    expect(failure(await leader).kind).toBe('timeout');
    expect(failure(await joiner).kind).toBe('timeout');
    const counted = stats();
    expect(counted.fillTimeouts).toBe(1);
    expect(counted.fillFailures + counted.fillTimeouts).toBeLessThanOrEqual(
      counted.fills + counted.fillsCancelled,
    );
  });

  it('a refresh given up by a cold miss, whose fill then fails, is counted once', async () => {
    const cache = testCache();
    const swr = { ttl: 300, staleWhileRevalidate: 500 } as const;
    await getOrComputeWith(cache, 'k', swr, () => 'v1');
    await vi.advanceTimersByTimeAsync(400);
    const refresh = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', swr, () => refresh.promise)).toBe('v1');
    await vi.advanceTimersByTimeAsync(500);
    // Past staleUntil: the cold miss gives the refresh up (no waitUntil) and fills.
    expect(await getOrComputeWith(cache, 'k', swr, () => 'v2')).toBe('v2');
    refresh.reject(new Error('db down'));
    await vi.advanceTimersByTimeAsync(1);
    const counted = stats();
    expect(counted).toMatchObject({
      backgroundRefreshes: 1,
      backgroundRefreshFailures: 1,
      fillTimeouts: 1,
      fillFailures: 0,
    });
    expect(counted.fillFailures + counted.fillTimeouts).toBeLessThanOrEqual(
      counted.fills + counted.fillsCancelled,
    );
    expect(cache.backend.read('k')?.value).toBe('v2');
  });
});

describe('a fill that answered but whose write never landed (isolated runtimes)', () => {
  it('its request ended with the write on its way: later calls fill afresh instead of getting its value forever', async () => {
    const cache = testCache();
    const write = cache.set.bind(cache);
    let writes: 'hang' | 'land' = 'hang';
    cache.set = (key, entry, options) =>
      writes === 'hang' ? new Promise<void>(() => {}) : write(key, entry, options);
    const request = nextFlightsRequest();
    expect(await getOrComputeWith(cache, 'k', { ttl: 100 }, () => 'first')).toBe('first');
    // Answered; its write is cancelled with its request.
    request.end();
    writes = 'land';
    expect(inFlightCount(cache)).toBe(1);
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS + HEARTBEAT_MS);
    const call = getOrComputeWith(cache, 'k', { ttl: 100 }, () => 'second');
    await vi.advanceTimersByTimeAsync(1);
    expect(await call).toBe('second');
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', { ttl: 100 }, () => 'third')).toBe('second');
  });

  it('a live request keeps its settled flight (the write still on its way) as before', async () => {
    const cache = testCache();
    const landed = deferred<void>();
    const write = cache.set.bind(cache);
    cache.set = (key, entry, options) => landed.promise.then(() => write(key, entry, options));
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'first')).toBe('first');
    // Past the silence bound, short of the write's own guard (which gives up a write that hangs).
    expect(SILENT_FLIGHT_MS * 2).toBeLessThan(WRITE_GUARD_MS);
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS * 2);
    // Still registered, beating: a call gets its value without a fill.
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'second')).toBe('first');
    landed.resolve();
    await vi.advanceTimersByTimeAsync(1);
    expect(inFlightCount(cache)).toBe(0);
    // Its heartbeat stopped with it: no timer is left.
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('a background refresh whose request is gone (isolated runtimes)', () => {
  const swr = { ttl: 300, staleWhileRevalidate: 500 } as const;

  it('without waitUntil: a cold miss past staleUntil does not join it but fills afresh, and its refresh slot is freed', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', swr, () => 'v1')).toBe('v1');
    await vi.advanceTimersByTimeAsync(400);
    const request = nextFlightsRequest();
    // A stale hit answers at once; the refresh it starts dies with its request.
    expect(await getOrComputeWith(cache, 'k', swr, never)).toBe('v1');
    request.end();
    expect(activeBackgroundRefreshes()).toBe(1);
    await vi.advanceTimersByTimeAsync(700);
    const cold = watch(getOrComputeWith(cache, 'k', swr, () => 'v2'));
    await vi.advanceTimersByTimeAsync(0);
    expect(cold.done).toBe(true);
    expect(cache.backend.read('k')?.value).toBe('v2');
    expect(activeBackgroundRefreshes()).toBe(0);
    expect(inFlightCount(cache)).toBe(0);
    expect(stats()).toMatchObject({
      backgroundRefreshes: 1,
      backgroundRefreshFailures: 1,
      coalescedWaits: 0,
    });
  });

  it('with waitUntil but dead all the same: the cold miss that joined it stops waiting within the bound, the slot is freed, the next call fills', async () => {
    const cache = testCache();
    const options = { ...swr, waitUntil: () => {} };
    await getOrComputeWith(cache, 'k', options, () => 'v1');
    await vi.advanceTimersByTimeAsync(400);
    const request = nextFlightsRequest();
    expect(await getOrComputeWith(cache, 'k', options, never)).toBe('v1');
    await vi.advanceTimersByTimeAsync(500);
    // Past staleUntil: the refresh's request is still alive, so the miss joins it.
    const cold = settle(getOrComputeWith(cache, 'k', options, () => 'unused'));
    request.end();
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS + HEARTBEAT_MS);
    expect(failure(await cold).kind).toBe('timeout');
    expect(activeBackgroundRefreshes()).toBe(0);
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', options, () => 'v2')).toBe('v2');
  });

  it('stale reads start a new refresh once the dead one has been silent for the bound', async () => {
    const cache = testCache();
    const options = { ttl: 300, staleWhileRevalidate: 60_000, waitUntil: () => {} };
    await getOrComputeWith(cache, 'k', options, () => 'v1');
    await vi.advanceTimersByTimeAsync(400);
    const request = nextFlightsRequest();
    await getOrComputeWith(cache, 'k', options, never);
    request.end();
    await vi.advanceTimersByTimeAsync(SILENT_FLIGHT_MS - 100);
    expect(await getOrComputeWith(cache, 'k', options, () => 'v2')).toBe('v1');
    expect(stats().backgroundRefreshes).toBe(1);
    await vi.advanceTimersByTimeAsync(200);
    // The first stale read past the bound lets a timer turn tell whether the refresh is gone; the
    // next one, after it, starts a new refresh.
    expect(await getOrComputeWith(cache, 'k', options, () => 'v2')).toBe('v1');
    expect(stats().backgroundRefreshes).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await getOrComputeWith(cache, 'k', options, () => 'v2')).toBe('v1');
    await vi.advanceTimersByTimeAsync(0);
    expect(cache.backend.read('k')?.value).toBe('v2');
    expect(stats().backgroundRefreshes).toBe(2);
    expect(activeBackgroundRefreshes()).toBe(0);
  });
});

describe('the warning and Node', () => {
  it('warns once per cache when a fill or refresh starts on an isolated runtime without waitUntil', async () => {
    const warnings: string[] = [];
    const off = onStampedeEvent((event: StampedeEvent) => {
      if (event.type === 'warning') warnings.push(event.message);
    });
    const print = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const kept = testCache({ name: 'kept' });
      await getOrComputeWith(kept, 'k', { ttl: 1, waitUntil: () => {} }, () => 'v');
      expect(warnings).toEqual([]);
      const cache = testCache({ name: 'bare' });
      await getOrComputeWith(cache, 'a', { ttl: 1 }, () => 'v');
      await getOrComputeWith(cache, 'b', { ttl: 1 }, () => 'v');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/cancels a request's work when the request ends/);
      expect(warnings[0]).toMatch(/ctx\.waitUntil/);
      configure({ isolatedRequests: false });
      await getOrComputeWith(testCache({ name: 'node' }), 'k', { ttl: 1 }, () => 'v');
      expect(warnings).toHaveLength(1);
    } finally {
      off();
      print.mockRestore();
    }
  });

  it('on Node nothing changes: no heartbeat, and a fill that never settles keeps its key for its joiners', async () => {
    configure({ isolatedRequests: false });
    const cache = testCache();
    const intervals = vi.spyOn(globalThis, 'setInterval');
    void getOrComputeWith(cache, 'k', { ttl: 60_000 }, never);
    expect(intervals).not.toHaveBeenCalled();
    const joiner = watch(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(joiner.done).toBe(false);
    expect(inFlightCount(cache)).toBe(1);
  });
});
