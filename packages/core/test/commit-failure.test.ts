import { afterEach, describe, expect, it, vi } from 'vitest';
import { type FillLock, getOrComputeWith, inFlightCount, resetStats, stats } from '../src/index.js';
import { deferred, flush, testCache } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
  resetStats();
});

describe('a lock commit that fails', () => {
  it('takes its flight out of the registry before the release, which an adapter may retry for long', async () => {
    const cache = testCache({ lock: true, combined: true, async: true, name: 'commit-failure' });
    const releasing = deferred<void>();
    const released: string[] = [];
    const acquire = cache.tryAcquireFillLock?.bind(cache);
    cache.tryAcquireFillLock = async (key, ttl) => {
      const held = (await acquire?.(key, ttl)) as FillLock | undefined;
      if (held === undefined) return undefined;
      return {
        commit: () => Promise.reject(new Error('connection reset')),
        release: async (outcome) => {
          released.push(outcome);
          // An adapter sending the release again after a fault: it lands much later.
          await releasing.promise;
          await held.release(outcome);
        },
      };
    };
    // The attempt-and-read form would skip tryAcquireFillLock: use the plain one.
    cache.tryAcquireFillLockAndRead = undefined;
    const options = { ttl: '1m', distributedFillLock: true } as const;
    expect(await getOrComputeWith(cache, 'k', options, () => 'filled')).toBe('filled');
    await flush();
    expect(released).toEqual(['filled']);
    // The value was not written: nobody may join it any more, though the release still runs.
    expect(inFlightCount(cache)).toBe(0);
    expect(stats().backendErrors).toBe(1);
    releasing.resolve();
    await flush();
    expect(inFlightCount(cache)).toBe(0);
  });
});
