import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTieredCache, getOrComputeWith, inFlightCount, whenIdle } from '../src/index.js';
import { deferred, flush, settle, testCache } from './helpers.js';
import { localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

// Shutdown: `whenIdle` waits for the work a cache's fills leave after their callers have answers
// (the write, the lock release, a background refresh), so that closing the client afterwards loses
// nothing. The remote adapters' close() call it first (tested against real servers there).

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('whenIdle', () => {
  it('is true at once for a cache never used and for one with nothing running', async () => {
    const cache = testCache();
    expect(await whenIdle(cache)).toBe(true);
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'v')).toBe('v');
    await flush();
    expect(await whenIdle(cache)).toBe(true);
  });

  it('waits for a write still in flight after the callers have their value', async () => {
    const cache = testCache();
    const write = deferred<void>();
    const set = cache.set.bind(cache);
    cache.set = async (key, entry, options) => {
      await write.promise;
      return set(key, entry, options);
    };
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'v')).toBe('v');
    let idle: boolean | undefined;
    void whenIdle(cache).then((result) => {
      idle = result;
    });
    await flush();
    expect(idle).toBeUndefined();
    expect(cache.backend.read('k')).toBeUndefined();
    write.resolve();
    await flush();
    expect(idle).toBe(true);
    expect(cache.backend.read('k')?.value).toBe('v');
  });

  it('waits for a background refresh nobody waits for, and for work started while it waits', async () => {
    const cache = testCache();
    const options = { ttl: 1_000, staleWhileRevalidate: 60_000 };
    await getOrComputeWith(cache, 'a', options, () => 'old a');
    await getOrComputeWith(cache, 'b', options, () => 'old b');
    vi.advanceTimersByTime(1_001);
    const refreshA = deferred<string>();
    const refreshB = deferred<string>();
    expect(await getOrComputeWith(cache, 'a', options, () => refreshA.promise)).toBe('old a');
    let idle: boolean | undefined;
    void whenIdle(cache).then((result) => {
      idle = result;
    });
    expect(await getOrComputeWith(cache, 'b', options, () => refreshB.promise)).toBe('old b');
    refreshA.resolve('new a');
    await flush();
    expect(cache.backend.read('a')?.value).toBe('new a');
    expect(idle).toBeUndefined();
    refreshB.resolve('new b');
    await flush();
    expect(idle).toBe(true);
    expect(cache.backend.read('b')?.value).toBe('new b');
  });

  it('gives up after timeout (default 5 s) with false, and the work goes on', async () => {
    const cache = testCache();
    const fill = deferred<string>();
    const answer = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => fill.promise);
    const byDefault = settle(whenIdle(cache));
    const short = settle(whenIdle(cache, { timeout: '100ms' }));
    await vi.advanceTimersByTimeAsync(100);
    expect(await short).toEqual({ ok: true, value: false });
    await vi.advanceTimersByTimeAsync(4_899);
    let early: unknown;
    void byDefault.then((result) => {
      early = result;
    });
    await flush();
    expect(early).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await byDefault).toEqual({ ok: true, value: false });
    expect(inFlightCount(cache)).toBe(1);
    fill.resolve('v');
    expect(await answer).toBe('v');
    expect(await whenIdle(cache, { timeout: 0 })).toBe(true);
  });

  it('rejects bad input naming the argument, and leaves no timer behind', async () => {
    await expect(whenIdle(undefined as never)).rejects.toThrow(
      new TypeError('cache must be a Cache; got undefined'),
    );
    const cache = testCache();
    await expect(whenIdle(cache, 'soon' as never)).rejects.toThrow(
      new TypeError('options must be an object; got string'),
    );
    await expect(whenIdle(cache, { timeout: -1 })).rejects.toThrow(RangeError);
    await expect(whenIdle(cache, { timeout: 'a while' as never })).rejects.toThrow(/options\.timeout/);
    const fill = deferred<string>();
    const answer = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => fill.promise);
    const idle = whenIdle(cache, { timeout: '1h' });
    fill.resolve('v');
    await answer;
    expect(await idle).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("a tiered cache's close()", () => {
  it('waits for its fills, then stops listening on the bus and frees its L1', async () => {
    const store = new RemoteStore();
    const local = localCache();
    const remote = remoteCache(store);
    const cache = createTieredCache({ local, remote, name: 'idle-tiered' });
    const fill = deferred<string>();
    const answer = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => fill.promise);
    let closed = false;
    void cache.close().then(() => {
      closed = true;
    });
    await flush();
    expect(closed).toBe(false);
    expect(store.subscribers.size).toBe(1);
    // Its fill still writes into L1: another tiered cache (another remote, another tenant) may not
    // take L1 over yet.
    expect(() =>
      createTieredCache({ local, remote: remoteCache(new RemoteStore()), name: 'idle-next' }),
    ).toThrow(/options\.local is already the local cache of tiered cache 'idle-tiered'/);
    fill.resolve('v');
    expect(await answer).toBe('v');
    await flush();
    expect(closed).toBe(true);
    expect(store.subscribers.size).toBe(0);
    expect(store.read('k')?.value).toBe('v');
    await createTieredCache({ local, remote, name: 'idle-tiered-next' }).close();
  });

  it('rejects a bad timeout, naming it', async () => {
    const cache = createTieredCache({ local: localCache(), remote: remoteCache(new RemoteStore()) });
    await expect(cache.close({ timeout: -5 })).rejects.toThrow(/options\.timeout/);
    await cache.close();
  });
});
