// Time comparisons at their exact instants (each case kills a mutation of one comparison that no
// other test caught: `<` for `<=` and the like).
import { getOrComputeWith, getValue, invalidateTag, setValue } from '@stampede/core';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

const T = 1_000_000;
beforeEach(() => {
  vi.useFakeTimers({ now: T });
});
afterEach(() => {
  vi.useRealTimers();
});
it('a setValue one ms after a same-ms bumped setValue still lands', async () => {
  const cache = createMemoryCache();
  await invalidateTag(cache, 't');
  await setValue(cache, 'k', 'a', { tags: ['t'] });
  vi.setSystemTime(T + 1);
  await setValue(cache, 'k', 'b', { tags: ['t'] });
  expect(await getValue(cache, 'k')).toBe('b');
});
it('a ttl-0 fill under fail-safe leaves no fallback in the memory cache', async () => {
  const cache = createMemoryCache();
  const opts = { ttl: 0, failSafe: { maxStale: '1m' } } as const;
  expect(await getOrComputeWith(cache, 'k', opts, () => 'v1')).toBe('v1');
  vi.setSystemTime(T + 1);
  await expect(
    getOrComputeWith(cache, 'k', opts, () => {
      throw new Error('down');
    }),
  ).rejects.toThrow();
});
