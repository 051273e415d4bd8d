// The runtime-neutral entry point (edge runtimes) has no async context: a fill that waits for its
// own key is bounded only by fillTimeout. This is the documented limit.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type CacheFillError, getOrComputeWith, inFlightCount } from '../src/index.js';
import { shared } from '../src/shared.js';
import { settle, testCache } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('without AsyncLocalStorage (edge runtimes)', () => {
  it('a fill that calls getOrCompute on its own key is released by fillTimeout', async () => {
    vi.useFakeTimers({ now: 0 });
    expect(shared.fills).toBeUndefined();
    const cache = testCache();
    const options = { ttl: '1m', fillTimeout: 500 } as const;
    const result = settle(
      getOrComputeWith(cache, 'k', options, () => getOrComputeWith(cache, 'k', options, () => 1)),
    );
    await vi.advanceTimersByTimeAsync(500);
    const outcome = await result;
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: CacheFillError }).error.kind).toBe('timeout');
    expect(inFlightCount(cache)).toBe(0);
  });
});
