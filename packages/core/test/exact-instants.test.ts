// Time comparisons at their exact instants (each case kills a mutation of one comparison that no
// other test caught: `<` for `<=` and the like).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { raceTimeout } from '../src/adapter.js';
import { configure, getOrComputeWith, getValue, invalidate, resetStats, setValue } from '../src/index.js';
import { Backend, settle, testCache } from './helpers.js';

const T = 1_000_000;
beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  configure({ isolatedRequests: false });
});
/** A fill that answers `value` (or throws, for an Error) 10 ms after it starts. */
const after10ms = (outcome: unknown) => async () => {
  await new Promise((resolve) => setTimeout(resolve, 10));
  if (outcome instanceof Error) throw outcome;
  return outcome;
};
const boom = () => {
  throw new Error('source down');
};

describe('time comparisons at their exact instants', () => {
  it('a fill in the same ms as an invalidation serves as a fail-safe fallback', async () => {
    const cache = testCache();
    await invalidate(cache, 'k');
    await getOrComputeWith(cache, 'k', { ttl: 1000, failSafe: { maxStale: '1m' } }, () => 'v1');
    await vi.advanceTimersByTimeAsync(1000);
    expect(await getOrComputeWith(cache, 'k', { ttl: 1000, failSafe: { maxStale: '1m' } }, boom)).toBe('v1');
  });
  it('at exactly freshEnd + maxStale there is no fallback (one ms before there is)', async () => {
    const opts = { ttl: 1000, failSafe: { maxStale: 5000 } };
    const slowFill = after10ms('v1');
    for (const [at, expectFallback] of [
      [5999, true],
      [6000, false],
    ] as const) {
      vi.setSystemTime(T);
      const cache = testCache();
      const first = getOrComputeWith(cache, 'k', opts, slowFill);
      await vi.advanceTimersByTimeAsync(10);
      expect(await first).toBe('v1');
      vi.setSystemTime(T + at);
      const r = await settle(getOrComputeWith(cache, 'k', opts, boom));
      expect(r.ok).toBe(expectFallback);
    }
  });
  it('a fill failing at exactly fallback.until gets no fallback', async () => {
    const opts = { ttl: 1000, failSafe: { maxStale: 5000 } };
    const cache = testCache();
    const first = getOrComputeWith(cache, 'k', opts, after10ms('v1'));
    await vi.advanceTimersByTimeAsync(10);
    await first;
    vi.setSystemTime(T + 5990);
    const r = settle(getOrComputeWith(cache, 'k', opts, after10ms(new Error('down'))));
    await vi.advanceTimersByTimeAsync(10);
    expect((await r).ok).toBe(false);
  });
  it('getValue at exactly freshUntil is undefined', async () => {
    const cache = testCache();
    await setValue(cache, 'k', 'v', { ttl: 1000, staleWhileRevalidate: 1000 });
    vi.setSystemTime(T + 999);
    expect(await getValue(cache, 'k')).toBe('v');
    vi.setSystemTime(T + 1000);
    expect(await getValue(cache, 'k')).toBeUndefined();
  });
  it('getValue allowStale at exactly staleUntil is undefined', async () => {
    const cache = testCache();
    const set = cache.set.bind(cache);
    cache.set = (key, entry, options) => set(key, entry, { ...options, ttl: 3_600_000 });
    await setValue(cache, 'k', 'v', { ttl: 1000, staleWhileRevalidate: 1000 });
    vi.setSystemTime(T + 1999);
    expect(await getValue(cache, 'k', { allowStale: true })).toBe('v');
    vi.setSystemTime(T + 2000);
    expect(await getValue(cache, 'k', { allowStale: true })).toBeUndefined();
  });
  it('an invalidation record is forgotten 60 000 ms later', async () => {
    const cache = testCache();
    const opts = { ttl: 1000, failSafe: { maxStale: '1h' } } as const;
    await getOrComputeWith(cache, 'a', opts, () => 'old');
    vi.setSystemTime(T + 10);
    const del = cache.delete;
    cache.delete = () => {
      throw new Error('delete lost');
    };
    await expect(invalidate(cache, 'a')).rejects.toThrow('delete lost');
    cache.delete = del;
    vi.setSystemTime(T + 10 + 60_000);
    await invalidate(cache, 'b');
    expect(await getOrComputeWith(cache, 'a', opts, boom)).toBe('old');
  });
  it('a lock-wait read of an entry at exactly its freshUntil is not the holder value', async () => {
    const backend = new Backend();
    backend.lock('k', 60_000);
    const cache = testCache({ backend, lock: true, async: true });
    const answer = getOrComputeWith(
      cache,
      'k',
      { ttl: '1m', distributedFillLock: true, lockPollInterval: 100, lockWaitTimeout: 300 },
      () => 'mine',
    );
    await vi.advanceTimersByTimeAsync(0);
    backend.entries.set('k', {
      entry: { value: 'theirs', createdAt: T, freshUntil: T + 100, staleUntil: T + 100 },
      expiresAt: Number.POSITIVE_INFINITY,
    });
    await vi.advanceTimersByTimeAsync(1000);
    expect(await answer).toBe('mine');
  });
  it('isolated joiner gives up a dead flight at exactly deadline + 1000', async () => {
    configure({ isolatedRequests: true });
    const cache = testCache();
    const spy = vi
      .spyOn(globalThis, 'setTimeout')
      .mockImplementationOnce(() => 0 as unknown as ReturnType<typeof setTimeout>);
    void getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 205 }, () => new Promise<string>(() => {}));
    spy.mockRestore();
    let done = false;
    const joiner = settle(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'unused'));
    void joiner.then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(1204);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
  });
  it('raceTimeout accepts 0 ms', async () => {
    await expect(raceTimeout(Promise.resolve('v'), 0, () => new Error('late'))).resolves.toBe('v');
  });
  it('the confirming read finds another replica entry whose maxStale ends exactly now: no fallback', async () => {
    const cache = testCache();
    const opts = { ttl: 1000, failSafe: { maxStale: 5000 } };
    await getOrComputeWith(cache, 'k', opts, () => 'v1'); // E1: createdAt T, freshUntil T+1000, until T+6000
    vi.setSystemTime(T + 5090);
    const r = settle(getOrComputeWith(cache, 'k', opts, after10ms(new Error('down'))));
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
});
