import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  CacheFillError,
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
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a failing fill never poisons the key', () => {
  it.each([
    ['rejects', async () => Promise.reject(new Error('db down'))],
    [
      'throws synchronously',
      () => {
        throw new Error('db down');
      },
    ],
  ])(
    'when it %s: leader gets kind fill, waiters fill_failed, nothing cached, next call fills',
    async (_l, failing) => {
      const cache = testCache();
      const fill = vi.fn(failing);
      const results = await Promise.all(
        Array.from({ length: 5 }, () => settle(getOrCompute(cache, 'k', 60_000, fill))),
      );
      expect(fill).toHaveBeenCalledTimes(1);
      const [leader, ...waiters] = results.map((r) => (r.ok ? undefined : (r.error as CacheFillError)));
      expect(leader).toBeInstanceOf(CacheFillError);
      expect(leader?.kind).toBe('fill');
      expect(leader?.key).toBe('k');
      expect(leader?.intoFill()).toEqual(new Error('db down'));
      expect(leader?.cause).toBe(leader?.intoFill());
      for (const waiter of waiters) {
        expect(isCacheFillError(waiter)).toBe(true);
        expect(waiter?.kind).toBe('fill_failed');
        expect(waiter?.message).toBe('db down');
        expect(waiter?.intoFill()).toBeUndefined();
        // ES2022 cause: the original error, the very object the leader's cause is.
        expect(waiter?.cause).toBe(leader?.cause);
      }
      expect(cache.calls.set).toBe(0);
      expect(cache.backend.entries.size).toBe(0);
      expect(inFlightCount(cache)).toBe(0);
      expect(stats()).toMatchObject({ fills: 1, fillFailures: 1, coalescedWaits: 4 });

      expect(await getOrCompute(cache, 'k', 60_000, () => 'recovered')).toBe('recovered');
      expect(stats().fills).toBe(2);
    },
  );

  it('removes the in-flight entry before waiters are notified', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const seenByWaiter: number[] = [];
    const leader = settle(getOrCompute(cache, 'k', 60_000, () => gate.promise));
    const waiter = getOrCompute(cache, 'k', 60_000, () => 'unused').catch(() => {
      seenByWaiter.push(inFlightCount(cache));
      return getOrCompute(cache, 'k', 60_000, () => 'retried');
    });
    gate.reject(new Error('boom'));
    expect(await waiter).toBe('retried');
    expect(seenByWaiter).toEqual([0]);
    expect((await leader).ok).toBe(false);
  });

  it('a fill that throws a non-Error still gives every caller a message', async () => {
    const cache = testCache();
    const results = await Promise.all([
      settle(getOrCompute(cache, 'k', 1_000, () => Promise.reject('plain string'))),
      settle(getOrCompute(cache, 'k', 1_000, () => 'x')),
    ]);
    const [leader, waiter] = results.map((r) => (r.ok ? undefined : (r.error as CacheFillError)));
    expect(leader?.intoFill()).toBe('plain string');
    expect(waiter?.message).toBe('plain string');
  });
});

describe('a fill that never settles', () => {
  it('with fillTimeout: every caller is released with kind timeout and the key can be filled again', async () => {
    vi.useFakeTimers();
    const cache = testCache();
    let fillSignal: AbortSignal | undefined;
    const never = (ctx: { signal: AbortSignal }) => {
      fillSignal = ctx.signal;
      return new Promise<string>(() => {});
    };
    const callers = Array.from({ length: 3 }, () =>
      settle(getOrComputeWith(cache, 'k', { ttl: 1_000, fillTimeout: '2s' }, never)),
    );
    await vi.advanceTimersByTimeAsync(1_999);
    expect(inFlightCount(cache)).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    for (const result of await Promise.all(callers)) {
      expect(result.ok).toBe(false);
      const error = (result as { error: CacheFillError }).error;
      expect(error.kind).toBe('timeout');
      expect(error.intoFill()).toBeUndefined();
    }
    expect(fillSignal?.aborted).toBe(true);
    expect(inFlightCount(cache)).toBe(0);
    expect(stats()).toMatchObject({ fillTimeouts: 1, fills: 1 });
    expect(await getOrComputeWith(cache, 'k', { ttl: 1_000, fillTimeout: '2s' }, () => 'second try')).toBe(
      'second try',
    );
  });

  it('a late result after the timeout is not written', async () => {
    vi.useFakeTimers();
    const cache = testCache();
    const gate = deferred<string>();
    const caller = settle(getOrComputeWith(cache, 'k', { fillTimeout: 100 }, () => gate.promise));
    await vi.advanceTimersByTimeAsync(100);
    expect((await caller).ok).toBe(false);
    gate.resolve('late');
    await vi.advanceTimersByTimeAsync(1);
    expect(cache.backend.entries.has('k')).toBe(false);
  });

  it("without fillTimeout: a caller's own signal still releases that caller", async () => {
    const cache = testCache();
    const controller = new AbortController();
    const caller = settle(
      getOrComputeWith(cache, 'k', { signal: controller.signal }, () => new Promise(() => {})),
    );
    controller.abort(new Error('client went away'));
    const result = await caller;
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.message).toBe('client went away');
  });
});
