// Time comparisons at their exact instants (each case kills a mutation of one comparison that no
// other test caught: `<` for `<=` and the like).
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { configure, getOrComputeWith, resetStats, stats } from '../src/index.js';
import { Backend, testCache } from './helpers.js';

const T0 = 1_000_000;
beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  configure({ random: Math.random });
  vi.useRealTimers();
});
const plant = (backend: Backend, remaining: number) =>
  backend.write(
    'k',
    { value: 'v1', createdAt: T0 - 1000, freshUntil: T0 + remaining, staleUntil: T0 + remaining, delta: 100 },
    3_600_000,
  );

/**
 * An early refresh (random draw 0.001) of an entry `remaining` ms from expiry, whose lock another
 * replica holds: answers the refresh function and the stale-free answer ('v1', the entry).
 */
async function earlyRefreshLoser(
  remaining: number,
  limits: { lockWaitTimeout: number; lockPollInterval?: number },
) {
  configure({ random: () => 0.001 });
  const backend = new Backend();
  plant(backend, remaining);
  backend.lock('k', 60_000);
  const cache = testCache({ backend, lock: true, async: true });
  const refresh = vi.fn(() => 'v2');
  const options = { ttl: '1m', earlyRefresh: true, distributedFillLock: true, ...limits } as const;
  expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('v1');
  return refresh;
}

it('an early refresh with lockWaitTimeout 0 that loses the lock yields (no local fill)', async () => {
  const refresh = await earlyRefreshLoser(600, { lockWaitTimeout: 0 });
  await vi.advanceTimersByTimeAsync(10);
  expect(refresh).not.toHaveBeenCalled();
  expect(stats().lockWaitTimeouts).toBe(0);
});

it('an early-refresh loser whose wait ends exactly at the previous freshUntil does not yield', async () => {
  const refresh = await earlyRefreshLoser(100, { lockWaitTimeout: 100, lockPollInterval: 1000 });
  await vi.advanceTimersByTimeAsync(100);
  expect(stats().lockWaitTimeouts).toBe(1);
  expect(refresh).toHaveBeenCalledTimes(1);
});
