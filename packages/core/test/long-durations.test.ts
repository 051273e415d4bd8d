import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { raceTimeout } from '../src/adapter.js';
import { getOrCompute, getOrComputeWith, isCacheFillError, resetStats } from '../src/index.js';
import { setLongTimeout, TIMER_MAX_MS } from '../src/timers.js';
import { Backend, deferred, settle, testCache } from './helpers.js';

const DAY = 86_400_000;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

// The fake timers overflow like Node's: a delay past 2^31 - 1 ms fires after 1 ms.
describe('durations beyond the 24.8-day timer limit behave as written', () => {
  it("fillTimeout '30d' does not fire after milliseconds, and fires at 30 days", async () => {
    const cache = testCache();
    const answer = settle(getOrComputeWith(cache, 'k', { fillTimeout: '30d' }, () => new Promise(() => {})));
    await vi.advanceTimersByTimeAsync(1_000);
    await vi.advanceTimersByTimeAsync(30 * DAY - 1_001);
    expect(vi.getTimerCount()).toBe(1);
    let outcome: Awaited<typeof answer> | undefined;
    void answer.then((settled) => {
      outcome = settled;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(outcome).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(outcome?.ok).toBe(false);
    const error = outcome?.ok === false ? outcome.error : undefined;
    expect(isCacheFillError(error) && error.kind).toBe('timeout');
  });

  it('a settled fill clears its long fillTimeout timer', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', { fillTimeout: '60d' }, () => 'v')).toBe('v');
    expect(vi.getTimerCount()).toBe(0);
  });

  it("lockTtl '80d' extends the lock a bounded number of times, never in a loop", async () => {
    const cache = testCache({ lock: true });
    const extensions: number[] = [];
    const acquire = cache.tryAcquireFillLock;
    cache.tryAcquireFillLock = async (key, ttl) => {
      const lock = await acquire?.(key, ttl);
      if (lock?.extend === undefined) return lock;
      const extend = lock.extend.bind(lock);
      return {
        release: (outcome) => lock.release(outcome),
        extend: (extra) => {
          extensions.push(extra);
          return extend(extra);
        },
      };
    };
    const fill = deferred<string>();
    const answer = getOrComputeWith(
      cache,
      'k',
      { ttl: '1m', distributedFillLock: true, lockTtl: '80d' },
      () => fill.promise,
    );
    await vi.advanceTimersByTimeAsync(300);
    expect(extensions).toEqual([]);
    await vi.advanceTimersByTimeAsync(100 * DAY);
    // Every 24.8 days at most (the timer limit), each time for the full 80 days.
    expect(extensions.length).toBe(Math.floor((100 * DAY) / TIMER_MAX_MS));
    expect(new Set(extensions)).toEqual(new Set([80 * DAY]));
    expect(cache.backend.locks.get('k')?.expiresAt).toBeGreaterThan(Date.now() + 55 * DAY);
    fill.resolve('v');
    expect(await answer).toBe('v');
  });

  it("lockPollInterval and lockWaitTimeout of '30d' wait 30 days, not a millisecond", async () => {
    const backend = new Backend();
    backend.lock('k', 365 * DAY);
    const cache = testCache({ backend, lock: true });
    const fill = vi.fn(() => 'local');
    const answer = getOrComputeWith(
      cache,
      'k',
      { ttl: '1m', distributedFillLock: true, lockPollInterval: '30d', lockWaitTimeout: '30d' },
      fill,
    );
    await vi.advanceTimersByTimeAsync(10 * DAY);
    expect(cache.calls.lock).toBe(1);
    expect(fill).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(20 * DAY);
    expect(await answer).toBe('local');
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it("raceTimeout of '30d' lets a command that answers in milliseconds succeed", async () => {
    const answer = raceTimeout(
      new Promise<string>((resolve) => setTimeout(() => resolve('answered'), 5)),
      30 * DAY,
      () => new Error('timed out'),
    );
    await vi.advanceTimersByTimeAsync(5);
    await expect(answer).resolves.toBe('answered');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('raceTimeout past the timer limit still times out at its deadline', async () => {
    const answer = settle(raceTimeout(new Promise(() => {}), 40 * DAY, () => new Error('timed out')));
    await vi.advanceTimersByTimeAsync(40 * DAY - 1);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await answer).toMatchObject({ ok: false, error: { message: 'timed out' } });
  });

  it('setLongTimeout fires once at its deadline, can be cleared, and honours unref', async () => {
    const fired = vi.fn();
    setLongTimeout(fired, 3 * TIMER_MAX_MS + 7);
    await vi.advanceTimersByTimeAsync(3 * TIMER_MAX_MS + 6);
    expect(fired).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toHaveBeenCalledTimes(1);
    const cleared = vi.fn();
    const timer = setLongTimeout(cleared, 2 * TIMER_MAX_MS, { unref: true });
    await vi.advanceTimersByTimeAsync(TIMER_MAX_MS + 1);
    timer.clear();
    timer.clear();
    await vi.advanceTimersByTimeAsync(2 * TIMER_MAX_MS);
    expect(cleared).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('huge ttls stay finite or mean forever', () => {
  it.each([
    ['1e21', 1e21],
    ['Number.MAX_VALUE', Number.MAX_VALUE],
  ])('a ttl of %s is stored as never expiring, with no physical TTL', async (_name, ttl) => {
    const cache = testCache();
    const written: (number | undefined)[] = [];
    const set = cache.set.bind(cache);
    cache.set = (key, entry, options) => {
      written.push(options.ttl);
      return set(key, entry, options);
    };
    expect(await getOrComputeWith(cache, 'k', { ttl, staleWhileRevalidate: ttl }, () => 'v')).toBe('v');
    expect(written).toEqual([undefined]);
    expect(cache.backend.entries.get('k')?.entry).toMatchObject({
      freshUntil: Number.POSITIVE_INFINITY,
      staleUntil: Number.POSITIVE_INFINITY,
    });
    await vi.advanceTimersByTimeAsync(365 * DAY);
    expect(await getOrCompute(cache, 'k', ttl, () => 'refilled')).toBe('v');
  });

  it('a long but exact ttl keeps its exact times', async () => {
    const cache = testCache();
    await getOrCompute(cache, 'k', 400 * DAY, () => 'v');
    expect(cache.backend.entries.get('k')?.entry.freshUntil).toBe(Date.now() + 400 * DAY);
  });
});
