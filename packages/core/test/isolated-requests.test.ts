import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { getConfig } from '../src/background.js';
import {
  type CacheFillError,
  configure,
  getOrComputeWith,
  inFlightCount,
  isCacheFillError,
  resetStats,
  stats,
} from '../src/index.js';
import { runsIsolatedRequests } from '../src/shared.js';
import { deferred, settle, testCache } from './helpers.js';

// What workerd requires (navigator.userAgent 'Cloudflare-Workers' turns it on there): a caller that
// joins a fill must not await a promise the fill settles, since the fill runs in another request's
// context. These tests turn the mode on by hand and check what a joiner does instead.

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 0 });
  configure({ isolatedRequests: true });
});
afterEach(() => {
  configure({ isolatedRequests: false });
  vi.useRealTimers();
});

/** The error of a call that must have failed. */
function failure(result: { ok: true; value: unknown } | { ok: false; error: unknown }): CacheFillError {
  if (result.ok) throw new Error(`expected a failure, got ${String(result.value)}`);
  expect(isCacheFillError(result.error)).toBe(true);
  return result.error as CacheFillError;
}

/** Resolves pending promise callbacks without letting any timer fire. */
async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

describe('isolated request contexts: joiners watch the fill from their own context', () => {
  it('one fill; each joiner settles from its own timer (at most 10 ms after the fill), never from the fill', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fills = 0;
    const fill = () => {
      fills++;
      return gate.promise;
    };
    const leader = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill));
    const joiners = Array.from({ length: 7 }, () =>
      settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill)),
    );
    let answered = 0;
    for (const joiner of joiners) void joiner.then(() => answered++);
    await vi.advanceTimersByTimeAsync(500);
    gate.resolve('v');
    await flushMicrotasks();
    // The leader's own promise is settled by its fill (same request); the joiners' are not.
    expect(await leader).toEqual({ ok: true, value: 'v' });
    expect(answered).toBe(0);
    await vi.advanceTimersByTimeAsync(10);
    expect(answered).toBe(7);
    for (const joiner of joiners) expect(await joiner).toEqual({ ok: true, value: 'v' });
    expect(fills).toBe(1);
    expect(stats()).toMatchObject({ misses: 8, coalescedWaits: 7, fills: 1 });
  });

  it('a failed fill reaches every joiner as a CacheFillError, from its own timer', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leader = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => gate.promise));
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    await vi.advanceTimersByTimeAsync(50);
    const cause = new Error('db down');
    gate.reject(cause);
    await vi.advanceTimersByTimeAsync(10);
    expect((await leader).ok).toBe(false);
    const error = failure(await joiner);
    expect(error.message).toMatch(/db down/);
    expect(error.kind).toBe('fill_failed');
    expect(error.cause).toBe(cause);
  });

  it('concurrent callers each read the backend themselves (no read shared across requests)', async () => {
    const cache = testCache({ async: true, readDelay: 5 });
    const calls = Array.from({ length: 3 }, () =>
      settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'v')),
    );
    await vi.advanceTimersByTimeAsync(50);
    for (const call of calls) expect(await call).toEqual({ ok: true, value: 'v' });
    expect(cache.calls.get).toBe(3);
    expect(stats().fills).toBe(1);

    configure({ isolatedRequests: false });
    const shared = testCache({ async: true, readDelay: 5 });
    const sharing = Array.from({ length: 3 }, () =>
      settle(getOrComputeWith(shared, 'k', { ttl: 60_000 }, () => 'v')),
    );
    await vi.advanceTimersByTimeAsync(50);
    for (const call of sharing) expect(await call).toEqual({ ok: true, value: 'v' });
    expect(shared.calls.get).toBe(1);
  });

  it('fail-safe: joiners watching from their own context get the previous value on a failure and after a soft timeout', async () => {
    const cache = testCache();
    const options = { ttl: 1_000, failSafe: true, softTimeout: 100 } as const;
    await getOrComputeWith(cache, 'k', options, () => 'v1');
    await vi.advanceTimersByTimeAsync(1_000);
    const failing = deferred<string>();
    const leader = settle(getOrComputeWith(cache, 'k', options, () => failing.promise));
    const joiner = settle(getOrComputeWith(cache, 'k', options, () => 'unused'));
    await vi.advanceTimersByTimeAsync(50);
    failing.reject(new Error('db down'));
    await vi.advanceTimersByTimeAsync(10);
    expect(await leader).toEqual({ ok: true, value: 'v1' });
    expect(await joiner).toEqual({ ok: true, value: 'v1' });

    // Past the re-armed throttle (30 s): a slow fill, and the soft timeout answers the watcher too.
    await vi.advanceTimersByTimeAsync(30_000);
    const slow = deferred<string>();
    const slowLeader = settle(getOrComputeWith(cache, 'k', options, () => slow.promise));
    const slowJoiner = settle(getOrComputeWith(cache, 'k', options, () => 'unused'));
    await vi.advanceTimersByTimeAsync(110);
    expect(await slowLeader).toEqual({ ok: true, value: 'v1' });
    expect(await slowJoiner).toEqual({ ok: true, value: 'v1' });
    slow.resolve('v2');
    await vi.advanceTimersByTimeAsync(1);
    expect(cache.backend.read('k')?.value).toBe('v2');
    expect(stats()).toMatchObject({ failSafeActivations: 1, softTimeouts: 1 });
  });

  it('a joiner leaves on its own signal or fillTimeout; the fill goes on and is written, even when every caller left', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const leaderLeaves = new AbortController();
    const leader = settle(
      getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaderLeaves.signal }, (ctx) => {
        fillSignal = ctx.signal;
        return gate.promise;
      }),
    );
    const leaves = new AbortController();
    const aborted = settle(getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaves.signal }, () => 'x'));
    const timed = settle(getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 100 }, () => 'x'));
    const patient = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'x'));

    leaves.abort(new Error('client went away'));
    expect(await aborted).toEqual({ ok: false, error: new Error('client went away') });
    await vi.advanceTimersByTimeAsync(100);
    expect(failure(await timed).kind).toBe('timeout');
    // The leader leaves too: a joiner still watches, so the fill is not abandoned.
    leaderLeaves.abort(new Error('leader went away'));
    expect((await leader).ok).toBe(false);
    expect(fillSignal?.aborted).toBe(false);

    gate.resolve('v');
    await vi.advanceTimersByTimeAsync(10);
    expect(await patient).toEqual({ ok: true, value: 'v' });
    expect(cache.backend.read('k')?.value).toBe('v');
    expect(inFlightCount(cache)).toBe(0);
  });

  it('a joiner that leaves last does not abort the fill from its own context: the fill ends and writes', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const leaderLeaves = new AbortController();
    const leader = settle(
      getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaderLeaves.signal }, (ctx) => {
        fillSignal = ctx.signal;
        return gate.promise;
      }),
    );
    const leaves = new AbortController();
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000, signal: leaves.signal }, () => 'x'));
    leaderLeaves.abort(new Error('leader went away'));
    leaves.abort(new Error('joiner went away'));
    expect((await leader).ok).toBe(false);
    expect((await joiner).ok).toBe(false);
    expect(fillSignal?.aborted).toBe(false);
    gate.resolve('v');
    await vi.advanceTimersByTimeAsync(1);
    expect(cache.backend.read('k')?.value).toBe('v');
  });

  it('gives up a flight whose fillTimeout timer never fired (its request is gone), so the next call fills again', async () => {
    const cache = testCache();
    // The leader's request context dies: its timers never run. Simulated by dropping the one timer
    // the flight arms for its fillTimeout.
    const setTimeoutSpy = vi
      .spyOn(globalThis, 'setTimeout')
      .mockImplementationOnce(() => 0 as unknown as ReturnType<typeof setTimeout>);
    void getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 200 }, () => new Promise<string>(() => {}));
    setTimeoutSpy.mockRestore();
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    let answered = false;
    void joiner.then(() => {
      answered = true;
    });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(answered).toBe(false);
    await vi.advanceTimersByTimeAsync(220);
    const error = failure(await joiner);
    expect(error.kind).toBe('timeout');
    expect(error.message).toMatch(/timer never fired/);
    expect(inFlightCount(cache)).toBe(0);
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'second')).toBe('second');
  });

  it('is on by default only on workerd, and configure() refuses a non-boolean without changing anything', async () => {
    expect(runsIsolatedRequests()).toBe(false);
    vi.stubGlobal('navigator', { userAgent: 'Cloudflare-Workers' });
    try {
      expect(runsIsolatedRequests()).toBe(true);
    } finally {
      vi.unstubAllGlobals();
    }
    configure({ isolatedRequests: false });
    const before = getConfig();
    expect(() =>
      configure({ maxBackgroundRefreshes: 3, isolatedRequests: 'yes' as unknown as boolean }),
    ).toThrow(new TypeError('config.isolatedRequests must be a boolean; got string'));
    expect(getConfig()).toEqual(before);
    // Joiners share the fill's promise again: settled without any timer.
    const cache = testCache();
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => gate.promise);
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    let answered = false;
    void joiner.then(() => {
      answered = true;
    });
    gate.resolve('v');
    await flushMicrotasks();
    expect(answered).toBe(true);
  });
});
