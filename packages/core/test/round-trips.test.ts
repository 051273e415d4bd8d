import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type BackendErrorEvent,
  type CacheEntry,
  configure,
  createTieredCache,
  type FillLock,
  type FillLockAttempt,
  type GetOrComputeOptions,
  getOrComputeWith,
  inFlightCount,
  onStampedeEvent,
  resetStats,
  stats,
  statsByCache,
} from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';
import { localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

// The optional capabilities that cut a locked miss's round trips: `tryAcquireFillLockAndRead` (the
// lock attempt reads the key too), `FillLock.commit` (write, release and announce in one step),
// announcements that carry the holder's value, and `hearsFillDone` (listen before the attempt).

const LOCKED: GetOrComputeOptions = { ttl: '1m', distributedFillLock: true, lockPollInterval: '1s' };
const T0 = 1_000_000;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

function fresh(value: unknown, createdAt = Date.now()): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + 60_000, staleUntil: createdAt + 60_000 };
}

/** A replica with the combined capabilities (and push wake-up), counting its reads. */
function replica(backend: Backend, options: { hears?: boolean } = {}) {
  return testCache({ backend, lock: true, push: true, combined: true, async: true, hears: options.hears });
}

describe('a locked miss on a cache that reads with the lock and commits', () => {
  it('the holder reads once, tries the lock with a read, and commits: no separate double-check, set or release', async () => {
    const backend = new Backend();
    const cache = replica(backend);
    expect(await getOrComputeWith(cache, 'k', LOCKED, () => 'filled')).toBe('filled');
    await flush();
    expect(cache.calls).toMatchObject({ get: 1, lockAndRead: 1, lock: 0, commit: 1, set: 0, release: [] });
    expect(backend.read('k')?.value).toBe('filled');
    expect(backend.locks.has('k')).toBe(false);
    expect(stats()).toMatchObject({ fills: 1, lockAcquired: 1, lockWaitHits: 0 });
  });

  it("the double-check comes with the lock attempt: another replica's value is served and the lock released as filled", async () => {
    const backend = new Backend();
    const cache = replica(backend);
    const get = cache.get;
    cache.get = (key) => {
      const read = get.call(cache, key);
      // Another replica writes between this miss and the lock attempt.
      backend.write(key, fresh('theirs'), 60_000);
      return read;
    };
    const fill = vi.fn(() => 'mine');
    expect(await getOrComputeWith(cache, 'k', LOCKED, fill)).toBe('theirs');
    expect(fill).not.toHaveBeenCalled();
    expect(cache.calls).toMatchObject({ get: 1, lockAndRead: 1, commit: 0, release: ['filled'] });
    expect(stats()).toMatchObject({ lockAcquired: 1, lockWaitHits: 1, fills: 0 });
  });

  it('an early refresh that finds only the value it set out to replace still fills', async () => {
    const backend = new Backend();
    const cache = replica(backend);
    // With random() at 0 every fresh hit of an entry with a fill time refreshes early.
    configure({ random: () => 0 });
    try {
      // Fresh for one more second; its fill took 100 ms (-100 ms x ln(2^-53) is about 3.7 s).
      backend.write(
        'k',
        { value: 'first', createdAt: T0 - 1, freshUntil: T0 + 1_000, staleUntil: T0 + 1_000, delta: 100 },
        60_000,
      );
      const fill = vi.fn(() => 'second');
      expect(await getOrComputeWith(cache, 'k', { ...LOCKED, earlyRefresh: true }, fill)).toBe('first');
      await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
      // The lock attempt read the still-fresh entry it set out to replace: that is no one's refresh.
      expect(fill).toHaveBeenCalledTimes(1);
      expect(cache.calls).toMatchObject({ lockAndRead: 1, commit: 1 });
      expect(backend.read('k')?.value).toBe('second');
    } finally {
      configure({ random: Math.random });
    }
  });

  it("a loser whose lock attempt finds the holder's value takes it without waiting or reading again", async () => {
    const backend = new Backend();
    const cache = replica(backend);
    // The holder wrote and still holds the lock (its release not landed yet).
    backend.lock('k', 60_000);
    const get = cache.get;
    cache.get = (key) => {
      const read = get.call(cache, key);
      backend.write(key, fresh('holder'), 60_000);
      return read;
    };
    expect(await getOrComputeWith(cache, 'k', LOCKED, () => 'loser')).toBe('holder');
    expect(cache.calls).toMatchObject({ get: 1, lockAndRead: 1 });
    expect(stats()).toMatchObject({ lockContended: 1, lockWaitHits: 1, fills: 0 });
  });

  it('a loser woken by the announcement of the holder it lost to takes the value from it: no read', async () => {
    const backend = new Backend();
    const holder = replica(backend);
    const loser = replica(backend, { hears: true });
    const gate = deferred<string>();
    const a = getOrComputeWith(holder, 'k', LOCKED, () => gate.promise);
    await vi.advanceTimersByTimeAsync(0);
    const b = getOrComputeWith(loser, 'k', LOCKED, () => 'loser');
    await vi.advanceTimersByTimeAsync(5);
    gate.resolve('pushed');
    await vi.advanceTimersByTimeAsync(0);
    expect(await a).toBe('pushed');
    expect(await b).toBe('pushed');
    // The miss and the lost attempt: the announcement carried the value.
    expect(loser.calls).toMatchObject({ get: 1, lockAndRead: 1 });
    expect(statsByCache().test).toMatchObject({ lockContended: 1, lockWaitHits: 1, fills: 1 });
  });

  it('an announcement by another holder than the one it lost to is not taken as the value: it reads', async () => {
    const backend = new Backend();
    const loser = replica(backend, { hears: true });
    backend.lock('k', 60_000);
    const b = getOrComputeWith(loser, 'k', LOCKED, () => 'loser');
    await vi.advanceTimersByTimeAsync(1);
    // An earlier fill's announcement, delivered late, carrying a value since deleted.
    for (const listener of backend.listeners.get('k') ?? []) {
      listener('filled', { holder: 'someone else', entry: fresh('deleted since') });
    }
    await vi.advanceTimersByTimeAsync(0);
    expect(loser.calls.get).toBe(2);
    // Nothing there: it goes on waiting, and fills once the lock lapses.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await b).toBe('loser');
  });

  it('a loser listens before its attempt where the cache already hears the key: no confirming read', async () => {
    const backend = new Backend();
    const loser = replica(backend, { hears: true });
    const readies: boolean[] = [];
    const onFillDone = loser.onFillDone;
    loser.onFillDone = (key, listener, ready) => {
      readies.push(ready !== undefined);
      return onFillDone?.call(loser, key, listener, ready) ?? (() => {});
    };
    backend.lock('k', 60_000);
    const b = settle(getOrComputeWith(loser, 'k', { ...LOCKED, lockWaitTimeout: 100 }, () => 'local'));
    await vi.advanceTimersByTimeAsync(100);
    expect((await b).ok).toBe(true);
    expect(readies).toEqual([false]);
  });

  it('a loser on a cache that does not hear the key yet listens after losing, with the confirming read', async () => {
    const backend = new Backend();
    const loser = replica(backend, { hears: false });
    const readies: boolean[] = [];
    const onFillDone = loser.onFillDone;
    loser.onFillDone = (key, listener, ready) => {
      readies.push(ready !== undefined);
      const stop = onFillDone?.call(loser, key, listener, ready) ?? (() => {});
      ready?.();
      return stop;
    };
    backend.lock('k', 60_000);
    const b = settle(getOrComputeWith(loser, 'k', { ...LOCKED, lockWaitTimeout: 100 }, () => 'local'));
    await vi.advanceTimersByTimeAsync(0);
    // The miss, then the read the acknowledgement triggers.
    expect(loser.calls.get).toBe(2);
    await vi.advanceTimersByTimeAsync(100);
    expect((await b).ok).toBe(true);
    expect(readies).toEqual([true]);
  });

  it('a commit that fails is a set fault, and the lock is released on its own', async () => {
    const backend = new Backend();
    const cache = replica(backend);
    const tryAcquire = cache.tryAcquireFillLockAndRead;
    cache.tryAcquireFillLockAndRead = async (key, ttl) => {
      const attempt = (await tryAcquire?.call(cache, key, ttl)) as FillLockAttempt;
      const lock = attempt.lock as FillLock;
      lock.commit = () => Promise.reject(new Error('commit refused'));
      return attempt;
    };
    const faults: BackendErrorEvent[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'backend-error') faults.push(event);
    });
    expect(await getOrComputeWith(cache, 'k', LOCKED, () => 'value')).toBe('value');
    await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
    off();
    expect(faults.map((fault) => fault.operation)).toEqual(['set']);
    expect(cache.calls.release).toEqual(['filled']);
    expect(backend.locks.has('k')).toBe(false);
  });

  it('a holder given up while it fills releases as failed and neither commits nor writes', async () => {
    const backend = new Backend();
    const cache = replica(backend);
    const gate = deferred<string>();
    const caller = settle(getOrComputeWith(cache, 'k', { ...LOCKED, fillTimeout: 100 }, () => gate.promise));
    await vi.advanceTimersByTimeAsync(100);
    expect((await caller).ok).toBe(false);
    gate.resolve('late');
    await vi.advanceTimersByTimeAsync(0);
    await flush();
    expect(cache.calls).toMatchObject({ commit: 0, set: 0, release: ['failed'] });
    expect(backend.read('k')).toBeUndefined();
  });

  it('fail-safe writes its re-armed value before the release, as without commit', async () => {
    const backend = new Backend();
    const cache = replica(backend);
    const options: GetOrComputeOptions = { ...LOCKED, ttl: 1_000, failSafe: { maxStale: '1h' } };
    expect(await getOrComputeWith(cache, 'k', options, () => 'good')).toBe('good');
    await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
    vi.setSystemTime(T0 + 2_000);
    const answer = await getOrComputeWith(cache, 'k', options, () => {
      throw new Error('source down');
    });
    expect(answer).toBe('good');
    await vi.waitFor(() => expect(cache.calls.release).toHaveLength(1));
    // The first fill committed; the failed one re-armed with `set`, then released as filled.
    expect(cache.calls).toMatchObject({ commit: 1, set: 1, release: ['filled'] });
    expect(backend.read('k')?.value).toBe('good');
  });
});

describe('a tiered cache whose remote commits', () => {
  it('keeps the L1 copy and publishes the eviction, as its writes do', async () => {
    const store = new RemoteStore();
    const log: string[] = [];
    const make = (name: string) => {
      const local = localCache(log, `${name}.local`);
      const remote = remoteCache(store, { log });
      const locks = new Map<string, number>();
      let next = 1;
      const handle = (key: string, token: number): FillLock => ({
        release() {
          if (locks.get(key) === token) locks.delete(key);
        },
        async commit(entry, { ttl }) {
          log.push(`remote.commit ${key}`);
          const written = store.write(key, entry, ttl);
          if (locks.get(key) === token) locks.delete(key);
          return written;
        },
      });
      Object.assign(remote, {
        tryAcquireFillLock: async (key: string) => {
          if (locks.has(key)) return undefined;
          const token = next++;
          locks.set(key, token);
          return handle(key, token);
        },
        tryAcquireFillLockAndRead: async (key: string): Promise<FillLockAttempt> => {
          const entry = store.read(key);
          if (locks.has(key)) return { lock: undefined, entry };
          const token = next++;
          locks.set(key, token);
          return { lock: handle(key, token), entry };
        },
      });
      return { local, cache: createTieredCache({ local, remote, name, localTtl: 60_000 }) };
    };
    const one = make('tiered-commit-1');
    make('tiered-commit-2');
    expect(await getOrComputeWith(one.cache, 'k', LOCKED, () => 'filled')).toBe('filled');
    await vi.waitFor(() => expect(inFlightCount(one.cache)).toBe(0));
    expect(log.filter((line) => line.startsWith('remote.'))).toEqual(['remote.commit k']);
    expect(log.some((line) => line.startsWith('publish'))).toBe(true);
    expect((await one.local.get('k'))?.value).toBe('filled');
    expect(statsByCache()['tiered-commit-2']).toMatchObject({ busEvictions: 1 });
  });
});
