import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type BackendErrorEvent,
  getOrCompute,
  getOrComputeWith,
  onStampedeEvent,
  resetStats,
  stats,
} from '../src/index.js';
import { testCache } from './helpers.js';

let events: BackendErrorEvent[] = [];
let off: () => void;
beforeEach(() => {
  resetStats();
  events = [];
  off = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterEach(() => {
  off();
});

/** A test cache whose reads fail: each call emits a `backend-error` event. */
function downCache(): ReturnType<typeof testCache> {
  const cache = testCache();
  cache.get = () => {
    throw new Error('down');
  };
  return cache;
}

describe('backend faults never fail a call whose fill succeeds', () => {
  it.each([
    [
      'throws',
      () => {
        throw new Error('ECONNREFUSED');
      },
    ],
    ['rejects', () => Promise.reject(new Error('ECONNREFUSED'))],
  ])('a read that %s is a miss, counted and reported', async (_label, failing) => {
    const cache = testCache();
    cache.get = failing;
    expect(await getOrCompute(cache, 'k', 1_000, () => 'filled')).toBe('filled');
    expect(stats()).toMatchObject({ backendErrors: 1, misses: 1, fills: 1 });
    expect(events[0]).toMatchObject({ operation: 'get', key: 'k', cache: 'test' });
  });

  it.each([
    [
      'throws',
      () => {
        throw new Error('READONLY');
      },
    ],
    ['rejects', () => Promise.reject(new Error('READONLY'))],
  ])('a write that %s still answers every caller', async (_label, failing) => {
    const cache = testCache();
    cache.set = failing;
    const values = await Promise.all(
      Array.from({ length: 3 }, () => getOrCompute(cache, 'k', 1_000, () => 'v')),
    );
    expect(values).toEqual(['v', 'v', 'v']);
    expect(stats()).toMatchObject({ backendErrors: 1, fills: 1 });
    expect(events[0]?.operation).toBe('set');
  });

  it('a lock that errors means a local fill, reported', async () => {
    const cache = testCache({ lock: true });
    cache.tryAcquireFillLock = () => Promise.reject(new Error('timeout'));
    expect(await getOrComputeWith(cache, 'k', { distributedFillLock: true }, () => 'local')).toBe('local');
    expect(stats()).toMatchObject({ backendErrors: 1, fills: 1 });
    expect(events[0]?.operation).toBe('lock');
  });

  it('a release that errors is reported, never thrown', async () => {
    const cache = testCache({ lock: true });
    const acquire = cache.tryAcquireFillLock;
    cache.tryAcquireFillLock = async (key, ttl) => {
      const lock = await acquire?.(key, ttl);
      return lock && { release: () => Promise.reject(new Error('gone')) };
    };
    expect(await getOrComputeWith(cache, 'k', { distributedFillLock: true }, () => 'v')).toBe('v');
    await vi.waitFor(() => expect(events.map((e) => e.operation)).toContain('release'));
  });

  it.each([
    {
      how: 'threw',
      what: 'a listener that throws',
      listener: () => {
        throw new Error('listener bug');
      },
    },
    {
      how: 'rejected',
      what: 'an async listener that rejects',
      listener: async () => {
        throw new Error('listener bug');
      },
    },
  ])(
    '$what never fails the request (nor the process), and is said once on the console',
    async ({ how, listener }) => {
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      const bad = onStampedeEvent(listener);
      try {
        const cache = downCache();
        expect(await getOrCompute(cache, 'k', 1_000, () => 1)).toBe(1);
        expect(await getOrCompute(cache, 'k2', 1_000, () => 2)).toBe(2);
        await new Promise((resolve) => setTimeout(resolve, 10));
        expect(unhandled).toEqual([]);
        const said = warn.mock.calls
          .map(([message]) => String(message))
          .filter((m) => m.includes(`listener ${how}`));
        expect(said).toEqual([
          `stampede: an onStampedeEvent listener ${how} on a 'backend-error' event (listener bug); it stays registered, and its later errors are not reported.`,
        ]);
      } finally {
        bad();
        process.off('unhandledRejection', onUnhandled);
        warn.mockRestore();
      }
    },
  );

  it('an unsubscribe called twice removes its own registration only', async () => {
    let seen = 0;
    const listener = (event: { type: string }) => {
      if (event.type === 'backend-error') seen++;
    };
    const offA = onStampedeEvent(listener);
    const offB = onStampedeEvent(listener);
    try {
      offA();
      offA();
      await getOrCompute(downCache(), 'k', 1_000, () => 1);
      expect(seen).toBe(1); // B's registration still hears the backend-error event
    } finally {
      offB();
    }
  });
});
