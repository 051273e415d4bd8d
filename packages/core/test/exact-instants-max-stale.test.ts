// Time comparisons at their exact instants (each case kills a mutation of one comparison that no
// other test caught: `<` for `<=` and the like).
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { getOrComputeWith, resetStats } from '../src/index.js';
import { settle, testCache } from './helpers.js';

const T = 1_000_000;
beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T });
});
afterEach(() => {
  vi.useRealTimers();
});
it('the confirming read finds another replica entry whose maxStale ends exactly now: no fallback', async () => {
  const cache = testCache();
  const opts = { ttl: 1000, failSafe: { maxStale: 5000 } };
  await getOrComputeWith(cache, 'k', opts, () => 'v1'); // E1: createdAt T, freshUntil T+1000, until T+6000
  vi.setSystemTime(T + 5090);
  const r = settle(
    getOrComputeWith(cache, 'k', opts, async () => {
      await new Promise((res) => setTimeout(res, 10));
      throw new Error('down');
    }),
  );
  await vi.advanceTimersByTimeAsync(5);
  // Another replica's entry (its fill started at T+100, with ttl 0): until = T+100 + 5000.
  cache.backend.write(
    'k',
    { value: 'v2', createdAt: T + 100, freshUntil: T + 100, staleUntil: T + 100 },
    3_600_000,
  );
  await vi.advanceTimersByTimeAsync(5);
  expect((await r).ok).toBe(false);
});
