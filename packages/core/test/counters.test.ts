import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheEntry,
  type GetOrComputeOptions,
  getOrComputeWith,
  resetStats,
  type StampedeStats,
  stats,
} from '../src/index.js';
import { Backend, deferred, settle, testCache } from './helpers.js';

const LOCKED: GetOrComputeOptions = { ttl: '1m', distributedFillLock: true };

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** The identities of docs/core.md ("Counter identities"), checked on a snapshot once nothing is in flight. */
function expectIdentities(s: StampedeStats, calls: number): void {
  expect(s.hits + s.staleHits + s.misses + s.abortedReads).toBe(calls);
  expect(s.misses - s.coalescedWaits + s.backgroundRefreshes).toBe(
    s.fills + s.lockWaitHits + s.fillsCancelled,
  );
  expect(s.fillFailures + s.fillTimeouts).toBeLessThanOrEqual(s.fills + s.fillsCancelled);
}

describe('counters add up', () => {
  it("the lock winner's double-check read that finds another replica's value counts as a lockWaitHit", async () => {
    const backend = new Backend();
    const cache = testCache({ backend, lock: true, async: true });
    // Another replica's fill lands between this replica's miss and its lock.
    const original = cache.tryAcquireFillLock;
    cache.tryAcquireFillLock = (key, ttl) => {
      const entry: CacheEntry = {
        value: 'theirs',
        createdAt: Date.now(),
        freshUntil: Date.now() + 60_000,
        staleUntil: Date.now() + 60_000,
      };
      backend.write(key, entry, undefined);
      return original?.(key, ttl);
    };
    const fill = vi.fn(() => 'ours');
    expect(await getOrComputeWith(cache, 'k', LOCKED, fill)).toBe('theirs');
    expect(fill).not.toHaveBeenCalled();
    const s = stats();
    expect(s).toMatchObject({ misses: 1, fills: 0, lockAcquired: 1, lockWaitHits: 1, fillsCancelled: 0 });
    expect(cache.calls.release).toEqual(['filled']);
    expectIdentities(s, 1);
  });

  it('a lock wait that every caller leaves is a cancelled fill', async () => {
    const backend = new Backend();
    backend.lock('k', 60_000);
    const cache = testCache({ backend, lock: true });
    const controller = new AbortController();
    const fill = vi.fn(() => 'v');
    const caller = settle(getOrComputeWith(cache, 'k', { ...LOCKED, signal: controller.signal }, fill));
    await vi.advanceTimersByTimeAsync(100);
    controller.abort(new Error('left'));
    await vi.advanceTimersByTimeAsync(1_000);
    expect((await caller).ok).toBe(false);
    expect(fill).not.toHaveBeenCalled();
    const s = stats();
    expect(s).toMatchObject({ misses: 1, fills: 0, lockContended: 1, fillsCancelled: 1 });
    expectIdentities(s, 1);
  });

  it('fillTimeout during the lock wait is a cancelled fill that timed out', async () => {
    const backend = new Backend();
    backend.lock('k', 60_000);
    const cache = testCache({ backend, lock: true });
    const callers = [
      settle(getOrComputeWith(cache, 'k', { ...LOCKED, fillTimeout: 300 }, () => 'v')),
      settle(getOrComputeWith(cache, 'k', LOCKED, () => 'v')),
    ];
    await vi.advanceTimersByTimeAsync(2_000);
    for (const result of await Promise.all(callers)) expect(result.ok).toBe(false);
    const s = stats();
    expect(s).toMatchObject({ misses: 2, coalescedWaits: 1, fills: 0, fillTimeouts: 1, fillsCancelled: 1 });
    expectIdentities(s, 2);
  });

  it('a lock acquired after the flight was given up is released and the fill counted as cancelled', async () => {
    const backend = new Backend();
    const cache = testCache({ backend, lock: true });
    const lock = deferred<undefined>();
    const original = cache.tryAcquireFillLock;
    cache.tryAcquireFillLock = (key, ttl) => lock.promise.then(() => original?.(key, ttl));
    const controller = new AbortController();
    const caller = settle(getOrComputeWith(cache, 'k', { ...LOCKED, signal: controller.signal }, () => 'v'));
    controller.abort(new Error('left'));
    lock.resolve(undefined);
    await vi.advanceTimersByTimeAsync(10);
    expect((await caller).ok).toBe(false);
    expect(cache.calls.release).toEqual(['failed']);
    const s = stats();
    expect(s).toMatchObject({ misses: 1, fills: 0, lockAcquired: 1, fillsCancelled: 1 });
    expectIdentities(s, 1);
  });

  it('a caller that leaves while its read is in flight, or before, is an abortedRead (neither hit nor miss)', async () => {
    const cache = testCache({ readDelay: 10 });
    const during = new AbortController();
    const caller = settle(getOrComputeWith(cache, 'k', { signal: during.signal }, () => 'v'));
    await vi.advanceTimersByTimeAsync(5);
    during.abort(new Error('left'));
    await vi.advanceTimersByTimeAsync(10);
    expect((await caller).ok).toBe(false);
    const before = new AbortController();
    before.abort(new Error('gone'));
    expect((await settle(getOrComputeWith(cache, 'k', { signal: before.signal }, () => 'v'))).ok).toBe(false);
    const s = stats();
    expect(s).toMatchObject({ hits: 0, misses: 0, abortedReads: 2, fills: 0 });
    expectIdentities(s, 2);
  });
});
