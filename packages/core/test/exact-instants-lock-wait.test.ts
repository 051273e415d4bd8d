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

it('an early refresh with lockWaitTimeout 0 that loses the lock yields (no local fill)', async () => {
  configure({ random: () => 0.001 });
  const backend = new Backend();
  plant(backend, 600);
  backend.lock('k', 60_000);
  const b = testCache({ backend, lock: true, async: true });
  const refresh = vi.fn(() => 'v2');
  expect(
    await getOrComputeWith(
      b,
      'k',
      { ttl: '1m', earlyRefresh: true, distributedFillLock: true, lockWaitTimeout: 0 },
      refresh,
    ),
  ).toBe('v1');
  await vi.advanceTimersByTimeAsync(10);
  expect(refresh).not.toHaveBeenCalled();
  expect(stats().lockWaitTimeouts).toBe(0);
});

it('an early-refresh loser whose wait ends exactly at the previous freshUntil does not yield', async () => {
  configure({ random: () => 0.001 });
  const backend = new Backend();
  plant(backend, 100);
  backend.lock('k', 60_000);
  const b = testCache({ backend, lock: true, async: true });
  const refresh = vi.fn(() => 'v2');
  expect(
    await getOrComputeWith(
      b,
      'k',
      {
        ttl: '1m',
        earlyRefresh: true,
        distributedFillLock: true,
        lockWaitTimeout: 100,
        lockPollInterval: 1000,
      },
      refresh,
    ),
  ).toBe('v1');
  await vi.advanceTimersByTimeAsync(100);
  expect(stats().lockWaitTimeouts).toBe(1);
  expect(refresh).toHaveBeenCalledTimes(1);
});
