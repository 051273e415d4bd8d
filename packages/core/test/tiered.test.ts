import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type Cache,
  type CacheEntry,
  configure,
  createTieredCache,
  getOrCompute,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  invalidateTag,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  setValue,
  statsByCache,
} from '../src/index.js';
import { BUS_ACK_TIMEOUT_MS } from '../src/tiered.js';
import { flush } from './helpers.js';
import { type Log, localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

const isThenable = (value: unknown): boolean =>
  typeof (value as { then?: unknown } | null | undefined)?.then === 'function';

let names = 0;
/** A replica: its own L1 and tiered cache, on the shared `store`. */
function replica(
  store: RemoteStore,
  options: { localTtl?: number; bus?: boolean; log?: Log; lateExpiry?: number; tags?: boolean } = {},
) {
  const log = options.log ?? [];
  const local = localCache(log, 'local', options.lateExpiry);
  const remote = remoteCache(store, { bus: options.bus, log, tags: options.tags });
  const name = `tiered-${++names}`;
  const cache = createTieredCache({ local, remote, name, localTtl: options.localTtl });
  const counters = () => statsByCache()[name];
  return { cache, local, remote, name, counters, log };
}

/** Waits until every fill of `cache` has written (a settled flight stays registered until then). */
async function settled(cache: Parameters<typeof inFlightCount>[0]): Promise<void> {
  for (let i = 0; i < 100 && inFlightCount(cache) !== 0; i++) await flush();
  expect(inFlightCount(cache)).toBe(0);
}

function entry(value: unknown, createdAt: number, ttl: number, grace = 0): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + ttl, staleUntil: createdAt + ttl + grace };
}

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('createTieredCache', () => {
  it('rejects bad options with errors naming them, before any I/O', () => {
    const store = new RemoteStore();
    const local = localCache();
    const remote = remoteCache(store);
    // @ts-expect-error: options are required
    expect(() => createTieredCache(undefined)).toThrow(new TypeError('options must be an object'));
    // @ts-expect-error: local must be a cache
    expect(() => createTieredCache({ local: {}, remote })).toThrow(/options\.local.*get/);
    // @ts-expect-error: remote must be a cache
    expect(() => createTieredCache({ local, remote: null })).toThrow(TypeError);
    expect(() => createTieredCache({ local, remote: local })).toThrow(/options\.local and options\.remote/);
    expect(() => createTieredCache({ local, remote, name: '' })).toThrow(/options\.name/);
    expect(() => createTieredCache({ local, remote, localTtl: 0 })).toThrow(RangeError);
    expect(() => createTieredCache({ local, remote, localTtl: -1 })).toThrow(/options\.localTtl/);
    // @ts-expect-error: not a duration
    expect(() => createTieredCache({ local, remote, localTtl: '5 weeks' })).toThrow(/options\.localTtl/);
    const badBus = { ...remote, bus: { publish: () => {} } };
    // @ts-expect-error: a bus needs subscribe
    expect(() => createTieredCache({ local, remote: badBus })).toThrow(/options\.remote\.bus/);
    expect(store.subscribers.size).toBe(0);
    expect(remote.calls).toEqual({ get: 0, set: 0, delete: 0, publish: 0, tags: 0 });
  });

  it("refuses a local cache that is already another tiered cache's L1 until that one is closed", async () => {
    const store = new RemoteStore();
    const shared = localCache();
    // Failed creations above hold nothing: the first tiered cache takes it.
    expect(() => createTieredCache({ local: shared, remote: remoteCache(store), localTtl: 0 })).toThrow(
      RangeError,
    );
    const first = createTieredCache({ local: shared, remote: remoteCache(store), name: 'tenant-a' });
    const other = new RemoteStore();
    // The keys are the caller's in L1: the second cache would be answered with the first one's values.
    expect(() => createTieredCache({ local: shared, remote: remoteCache(other), name: 'tenant-b' })).toThrow(
      new TypeError(
        "options.local is already the local cache of tiered cache 'tenant-a': give each tiered cache a local cache of its own (close() that one first, and await it while it has fills in flight, to reuse it)",
      ),
    );
    expect(await getOrCompute(first, 'k', 60_000, () => 'a')).toBe('a');
    // The fill's write may still be in flight: close() frees L1 once it has landed.
    await first.close();
    await first.close();
    const second = createTieredCache({ local: shared, remote: remoteCache(other), name: 'tenant-b' });
    // Closing the first again does not release the second's hold.
    first.close();
    expect(() => createTieredCache({ local: shared, remote: remoteCache(other) })).toThrow(/tenant-b/);
    second.close();
  });

  it('a close() whose timeout passes first frees L1 emptied, and the fill still running never writes into it', async () => {
    vi.useFakeTimers();
    try {
      const shared = localCache();
      const first = createTieredCache({
        local: shared,
        remote: remoteCache(new RemoteStore()),
        name: 'tenant-1',
      });
      await getOrCompute(first, 'cached', 60_000, () => 'tenant 1, cached');
      const slow = getOrCompute(first, 'profile', 60_000, async () => {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        return 'tenant 1 profile';
      });
      const closing = first.close({ timeout: 100 });
      await vi.advanceTimersByTimeAsync(100);
      await closing;
      const otherStore = new RemoteStore();
      const second = createTieredCache({ local: shared, remote: remoteCache(otherStore), name: 'tenant-2' });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(await slow).toBe('tenant 1 profile');
      await flush();
      // Neither the first tenant's copies nor its late write reach the second tenant.
      expect(await getOrCompute(second, 'profile', 60_000, () => 'tenant 2 profile')).toBe(
        'tenant 2 profile',
      );
      expect(await getOrCompute(second, 'cached', 60_000, () => 'tenant 2, cached')).toBe('tenant 2, cached');
      second.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('once closed, a tiered cache is its remote alone: it never reads L1 again, so it stays coherent', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    await setValue(a.cache, 'k', 'v1', { ttl: 60_000 });
    expect(await getOrCompute(a.cache, 'k', 60_000, () => 'unused')).toBe('v1');
    await a.cache.close();
    // Another replica's write, which the closed cache no longer hears over the bus.
    await setValue(b.cache, 'k', 'v2', { ttl: 60_000 });
    expect(await getOrCompute(a.cache, 'k', 60_000, () => 'unused')).toBe('v2');
    expect(await getValue(a.cache, 'k')).toBe('v2');
    // Its own writes go to the remote, not to the L1 it gave up.
    await setValue(a.cache, 'k', 'v3', { ttl: 60_000 });
    expect(a.local.get('k')).toBeUndefined();
    expect(await getValue(b.cache, 'k')).toBe('v3');
    b.cache.close();
  });

  it('offers the lock, push wake-up and round trip exactly when the remote does', () => {
    const store = new RemoteStore();
    const plain = createTieredCache({ local: localCache(), remote: remoteCache(store) });
    expect(plain.tryAcquireFillLock).toBeUndefined();
    expect(plain.onFillDone).toBeUndefined();
    expect(plain.roundTrip).toBeUndefined();
    expect(plain.name).toBe('tiered');
    const remote = remoteCache(store, { roundTrip: true });
    const lock = { release: () => {} };
    const withAll = Object.assign(remote, {
      tryAcquireFillLock: vi.fn(() => lock),
      onFillDone: vi.fn(() => () => {}),
    });
    const tiered = createTieredCache({ local: localCache(), remote: withAll });
    expect(tiered.tryAcquireFillLock?.('k', 1_000)).toBe(lock);
    expect(withAll.tryAcquireFillLock).toHaveBeenCalledWith('k', 1_000);
    const ready = () => {};
    tiered.onFillDone?.('k', () => {}, ready);
    expect(withAll.onFillDone).toHaveBeenCalledWith('k', expect.any(Function), ready);
    expect(tiered.roundTrip?.({ at: new Date(0) })).toEqual({ at: '1970-01-01T00:00:00.000Z' });
  });

  it("follows the remote's lock when the remote withdraws it later (a Redis user refused scripts)", async () => {
    const store = new RemoteStore();
    const lock = { release: () => {} };
    let usable = true;
    const acquire = vi.fn(() => lock);
    const remote = Object.defineProperty(remoteCache(store), 'tryAcquireFillLock', {
      get: () => (usable ? acquire : undefined),
      enumerable: true,
    });
    const tiered = createTieredCache({ local: localCache(), remote });
    expect(tiered.tryAcquireFillLock?.('k', 1_000)).toBe(lock);
    usable = false;
    expect(tiered.tryAcquireFillLock).toBeUndefined();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const fill = vi.fn(async () => 'v');
    const options = { ttl: 60_000, distributedFillLock: true };
    expect(await getOrComputeWith(tiered, 'k', options, fill)).toBe('v');
    // Not taken through the withdrawn lock, and no second warning (the remote warned itself).
    expect(acquire).toHaveBeenCalledTimes(1);
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
    usable = true;
    expect(tiered.tryAcquireFillLock?.('k', 1_000)).toBe(lock);
  });
});

describe('reads', () => {
  it('serves an L1 hit synchronously with no remote command, through getOrCompute', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    const calls = { ...a.remote.calls };
    expect(isThenable(a.cache.get('k'))).toBe(false);
    const fill = vi.fn(() => 'filled');
    for (let i = 0; i < 5; i++) expect(await getOrCompute(a.cache, 'k', 60_000, fill)).toBe('v');
    expect(fill).not.toHaveBeenCalled();
    expect(a.remote.calls).toEqual(calls);
    expect(a.counters()?.hits).toBe(5);
    expect(a.counters()?.l1Hits).toBe(6);
    expect(a.counters()?.l2Hits).toBe(0);
  });

  it('callers that share one L2 read count one l2Hit each: hits <= l1Hits + l2Hits', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    b.remote.holdReads = true;
    const fill = vi.fn(() => 'filled');
    const calls = [
      ...Array.from({ length: 5 }, () => getOrCompute(b.cache, 'k', 60_000, fill)),
      ...Array.from({ length: 5 }, () => getOrComputeWith(b.cache, 'k', { ttl: 60_000 }, fill)),
    ];
    b.remote.holdReads = false;
    b.remote.releaseReads();
    expect(await Promise.all(calls)).toEqual(Array(10).fill('v'));
    expect(fill).not.toHaveBeenCalled();
    expect(b.remote.calls.get).toBe(1);
    const { hits = 0, l1Hits = 0, l2Hits = 0 } = b.counters() ?? {};
    expect(hits).toBe(10);
    expect(hits).toBeLessThanOrEqual(l1Hits + l2Hits);
  });

  it('callers sharing a read the remote failed, answered by the stale L1 copy, count no l2Hit', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const options = { ttl: 100, staleWhileRevalidate: 60_000 };
    expect(await getOrComputeWith(a.cache, 'k', options, () => 'v')).toBe('v');
    await settled(a.cache);
    await vi.advanceTimersByTimeAsync(150);
    store.down = true;
    resetStats();
    const calls = Array.from({ length: 3 }, () => getOrComputeWith(a.cache, 'k', options, () => 'new'));
    expect(await Promise.all(calls)).toEqual(['v', 'v', 'v']);
    expect(a.counters()).toMatchObject({ staleHits: 3, l1Hits: 0, l2Hits: 0 });
  });

  it('an L1 that answers asynchronously: callers sharing its read count l1Hits, and it is read once per read', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    let l1Reads = 0;
    const syncGet = a.local.get.bind(a.local);
    (a.local as { get: Cache['get'] }).get = (key: string) => {
      l1Reads++;
      return Promise.resolve(syncGet(key));
    };
    expect(await getOrCompute(a.cache, 'k', 60_000, () => 'v')).toBe('v');
    await settled(a.cache);
    const getsBefore = a.remote.calls.get;
    for (const round of [1, 2]) {
      resetStats();
      l1Reads = 0;
      const calls = Array.from({ length: 5 }, () => getOrCompute(a.cache, 'k', 60_000, () => 'filled'));
      expect(await Promise.all(calls)).toEqual(Array(5).fill('v'));
      expect(a.counters()).toMatchObject({ hits: 5, l1Hits: 5, l2Hits: 0 });
      // One shared read of L1 (the first round also paid the core's look for a fast path).
      expect(l1Reads).toBe(round === 1 ? 2 : 1);
    }
    expect(a.remote.calls.get).toBe(getsBefore);
  });

  it('an L1 whose get throws: getOrCompute answers from L2 and counts the fault once', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    a.local.get = () => {
      throw new Error('L1 broken');
    };
    const fill = vi.fn(() => 'filled');
    expect(await getOrCompute(a.cache, 'k', 60_000, fill)).toBe('v');
    expect(fill).not.toHaveBeenCalled();
    expect(a.remote.calls.get).toBe(1);
    expect(a.counters()).toMatchObject({ backendErrors: 1, l1Hits: 0, l2Hits: 1, hits: 1 });
  });

  it('a stale L1 copy on the hit path asks L2 (a newer value there is served)', async () => {
    vi.useFakeTimers({ now: 0 });
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    expect(await getOrCompute(a.cache, 'k', 100, () => 'old')).toBe('old');
    await settled(a.cache);
    await vi.advanceTimersByTimeAsync(150);
    // Written to L2 by a replica outside the bus: a's L1 still holds the expired copy.
    await setValue(b.remote, 'k', 'new', { ttl: 60_000 });
    expect(await getOrCompute(a.cache, 'k', 100, () => 'filled')).toBe('new');
    expect(a.counters()).toMatchObject({ l1Hits: 0, l2Hits: 1 });
  });

  it('reads L2 on an L1 miss and keeps the entry in L1', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    expect(await getOrCompute(a.cache, 'k', 60_000, () => 'from-a')).toBe('from-a');
    await settled(a.cache);
    const fill = vi.fn(() => 'from-b');
    expect(await getOrCompute(b.cache, 'k', 60_000, fill)).toBe('from-a');
    expect(b.remote.calls.get).toBe(1);
    expect(b.counters()?.l2Hits).toBe(1);
    expect(await getOrCompute(b.cache, 'k', 60_000, fill)).toBe('from-a');
    expect(b.remote.calls.get).toBe(1);
    expect(b.counters()?.l1Hits).toBe(1);
    expect(fill).not.toHaveBeenCalled();
  });

  it('keeps an L2 entry in L1 at most localTtl: a lost message stales a replica no longer than that', async () => {
    const store = new RemoteStore();
    const a = replica(store, { localTtl: 1_000 });
    const b = replica(store, { localTtl: 1_000 });
    await setValue(a.cache, 'k', 'old', { ttl: 600_000 });
    expect(await getValue(b.cache, 'k')).toBe('old');
    expect(b.local.expiresAt('k')).toBe(Date.now() + 1_000);
    store.hold = true; // the eviction message is lost
    await setValue(a.cache, 'k', 'new', { ttl: 600_000 });
    await vi.advanceTimersByTimeAsync(999);
    expect(await getValue(b.cache, 'k')).toBe('old');
    await vi.advanceTimersByTimeAsync(1);
    expect(await getValue(b.cache, 'k')).toBe('new');
  });

  it('serves an L1 copy localTtl at most, to the millisecond, from a local cache whose expiry comes late', async () => {
    const store = new RemoteStore();
    const a = replica(store, { localTtl: 200 });
    // Physical expiry a second late, as the memory adapter's may be.
    const b = replica(store, { localTtl: 200, lateExpiry: 1_000 });
    await setValue(a.cache, 'k', 'old', { ttl: 600_000 });
    expect(await getValue(b.cache, 'k')).toBe('old');
    expect(await getOrCompute(b.cache, 'k', 600_000, () => 'filled')).toBe('old');
    store.hold = true; // the eviction message is lost
    await setValue(a.cache, 'k', 'new', { ttl: 600_000 });
    await vi.advanceTimersByTimeAsync(199);
    expect(await getOrCompute(b.cache, 'k', 600_000, () => 'filled')).toBe('old');
    expect(b.counters()?.l1Hits).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(b.local.get('k')?.value).toBe('old'); // still held by the local cache
    // Both hit paths (the core's, which reads L1 directly, and the tiered cache's get) ask L2 now.
    expect(await getOrCompute(b.cache, 'k', 600_000, () => 'filled')).toBe('new');
    await vi.advanceTimersByTimeAsync(200);
    await setValue(a.cache, 'k', 'newer', { ttl: 600_000 });
    expect(await getValue(b.cache, 'k')).toBe('newer');
    expect(b.counters()?.l1Hits).toBe(2);
  });

  it("times an early refresh of an L1 hit by the entry's freshness, not the copy's localTtl", async () => {
    const store = new RemoteStore();
    const a = replica(store, { localTtl: 1_000 });
    const b = replica(store, { localTtl: 1_000 });
    const options = { ttl: 600_000, earlyRefresh: true };
    await getOrComputeWith(a.cache, 'k', options, async () => {
      await vi.advanceTimersByTimeAsync(100); // delta 100 ms
      return 'v';
    });
    await settled(a.cache);
    configure({ random: () => 0.01 }); // -ln(0.01) = 4.6: 460 ms ahead of an expiry
    try {
      expect(await getOrComputeWith(b.cache, 'k', options, () => 'refreshed')).toBe('v');
      await vi.advanceTimersByTimeAsync(900); // 100 ms before the copy's localTtl
      const fill = vi.fn(() => 'refreshed');
      expect(await getOrComputeWith(b.cache, 'k', options, fill)).toBe('v');
      await settled(b.cache);
      expect(fill).not.toHaveBeenCalled();
      expect(b.counters()?.earlyRefreshes ?? 0).toBe(0);
    } finally {
      configure({ random: Math.random });
    }
  });

  it('keeps a read L1 copy localTtl, but serves it only within the entry freshness and grace', async () => {
    const store = new RemoteStore();
    const a = replica(store, { localTtl: 60_000 });
    const b = replica(store, { localTtl: 60_000 });
    await setValue(a.cache, 'k', 'v', { ttl: 500, staleWhileRevalidate: 200 });
    expect(await getValue(b.cache, 'k')).toBe('v');
    // Kept past the grace: fail-safe's fallback should the remote go down (see "fail-safe through a
    // tiered cache").
    expect(b.local.expiresAt('k')).toBe(Date.now() + 60_000);
    await vi.advanceTimersByTimeAsync(500);
    // Stale: not an L1 hit; the remote is asked (another replica may have refreshed it).
    const reads = b.remote.calls.get;
    expect(await getValue(b.cache, 'k', { allowStale: true })).toBe('v');
    expect(b.remote.calls.get).toBe(reads + 1);
    await vi.advanceTimersByTimeAsync(200);
    expect(b.local.get('k')?.value).toBe('v');
    expect(await b.cache.get('k')).toBeUndefined();
    expect(await getValue(b.cache, 'k', { allowStale: true })).toBeUndefined();
  });

  it('does not keep a remote read in L1 when the key was evicted while the read was in flight', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    await setValue(a.cache, 'k', 'old', { ttl: 60_000 });
    b.remote.holdReads = true;
    const read = b.cache.get('k'); // reads 'old' on the server, answer still on its way
    await flush();
    const evictions = b.counters()?.busEvictions ?? 0;
    await setValue(a.cache, 'k', 'new', { ttl: 60_000 }); // evicts 'k' from b's L1 meanwhile
    expect(b.counters()?.busEvictions).toBe(evictions + 1);
    b.remote.releaseReads();
    expect((await read)?.value).toBe('old');
    expect(b.local.get('k')).toBeUndefined();
    expect(await getValue(b.cache, 'k')).toBe('new');
    expect(b.local.get('k')?.value).toBe('new');
  });

  it('serves fresh L1 hits while the remote is down, and fills misses locally', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    expect(await getOrCompute(a.cache, 'cached', 60_000, () => 'v')).toBe('v');
    await settled(a.cache);
    store.down = true;
    const fill = vi.fn(() => 'local');
    expect(await getOrCompute(a.cache, 'cached', 60_000, fill)).toBe('v');
    expect(fill).not.toHaveBeenCalled();
    expect(await getOrCompute(a.cache, 'other', 60_000, fill)).toBe('local');
    await settled(a.cache);
    expect(fill).toHaveBeenCalledTimes(1);
    // The failed remote write still landed in L1: the next call is an L1 hit.
    expect(await getOrCompute(a.cache, 'other', 60_000, fill)).toBe('local');
    expect(fill).toHaveBeenCalledTimes(1);
    expect(a.counters()?.backendErrors).toBeGreaterThanOrEqual(2); // the failed read and write
  });

  it('serves a stale L1 copy (SWR) when the remote read fails', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const options = { ttl: 1_000, staleWhileRevalidate: 10_000 };
    await getOrComputeWith(a.cache, 'k', options, () => 'v');
    await settled(a.cache);
    await vi.advanceTimersByTimeAsync(2_000);
    store.down = true;
    const fill = vi.fn(() => 'refreshed');
    expect(await getOrComputeWith(a.cache, 'k', options, fill)).toBe('v');
    expect(a.counters()?.staleHits).toBe(1);
  });
});

describe('writes', () => {
  it('writes the remote, then L1, then publishes; deletes the same way', async () => {
    const log: Log = [];
    const a = replica(new RemoteStore(), { log });
    await setValue(a.cache, 'k', 'v');
    await invalidate(a.cache, 'k');
    // The first acknowledgement of the subscription clears L1 (copies taken before may have missed
    // messages), then each write goes remote first.
    expect(log).toEqual([
      'local.clear',
      'remote.set k',
      'local.set k',
      'publish k|k',
      'remote.delete k',
      'local.delete k',
      'publish k|k',
    ]);
  });

  it('drops the L1 copy when the remote refuses the write (a newer entry is there)', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const now = Date.now();
    a.local.set('k', entry('mine', now - 10, 60_000), { ttl: 60_000, direct: true });
    store.write('k', entry('newer', now, 60_000), 60_000);
    expect(await a.cache.set('k', entry('older', now - 5, 60_000), { ttl: 60_000 })).toBe(false);
    expect(a.local.get('k')).toBeUndefined();
    expect((await a.cache.get('k'))?.value).toBe('newer');
  });

  it('does not keep its write in L1 when another replica changed the key while the write was in flight', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    // a's write lands on the server at once, but its answer is slow; b's newer write and its
    // eviction message arrive in between.
    let answer: () => void = () => {};
    const slow = new Promise<void>((resolve) => {
      answer = resolve;
    });
    a.remote.set = async (key, written, options) => {
      const stored = store.write(key, written, options.ttl, options.direct);
      await slow;
      return stored;
    };
    const now = Date.now();
    const writing = a.cache.set('k', entry('a', now, 60_000), { ttl: 60_000 });
    await flush();
    await b.cache.set('k', entry('b', now + 1, 60_000), { ttl: 60_000 });
    answer();
    expect(await writing).toBe(true);
    expect(a.local.get('k')).toBeUndefined();
    expect((await a.cache.get('k'))?.value).toBe('b');
  });

  it('writes L1 and rethrows when the remote write fails', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    store.down = true;
    await expect(a.cache.set('k', entry('v', Date.now(), 60_000), { ttl: 60_000 })).rejects.toThrow(
      'remote down',
    );
    expect(a.local.get('k')?.value).toBe('v');
  });

  it('keeps in L1 the value the remote would give back', async () => {
    const store = new RemoteStore();
    const local = localCache();
    const cache = createTieredCache({ local, remote: remoteCache(store, { roundTrip: true }), name: 'rt' });
    const at = new Date(0);
    expect(await getOrCompute(cache, 'k', 60_000, () => ({ at }))).toEqual({ at: at.toISOString() });
    await settled(cache);
    expect(await getOrCompute(cache, 'k', 60_000, () => ({ at }))).toEqual({ at: at.toISOString() });
    expect(statsByCache().rt?.l1Hits).toBe(1);
  });

  it('bounds an L1 write by localTtl', async () => {
    const a = replica(new RemoteStore(), { localTtl: 2_000 });
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    expect(a.local.expiresAt('k')).toBe(Date.now() + 2_000);
    await setValue(a.cache, 'short', 'v', { ttl: 500 });
    expect(a.local.expiresAt('short')).toBe(Date.now() + 500);
  });
});

describe('the invalidation bus', () => {
  it('evicts the key from every other replica on setValue, invalidate and a fill; never re-reads', async () => {
    const store = new RemoteStore();
    const [a, b, c] = [replica(store), replica(store), replica(store)];
    await setValue(a.cache, 'k', 1, { ttl: 60_000 });
    for (const r of [b, c]) expect(await getOrCompute(r.cache, 'k', 60_000, () => 0)).toBe(1);
    const reads = b.remote.calls.get;
    await invalidate(a.cache, 'k');
    expect(b.local.get('k')).toBeUndefined();
    expect(c.local.get('k')).toBeUndefined();
    expect(b.remote.calls.get).toBe(reads); // evicted, not re-read
    expect(await getOrCompute(b.cache, 'k', 60_000, () => 2)).toBe(2);
    await settled(b.cache);
    expect(await getOrCompute(a.cache, 'k', 60_000, () => 0)).toBe(2);
    expect(await getOrCompute(c.cache, 'k', 60_000, () => 0)).toBe(2);
    // One per message from another replica: a's setValue and invalidate, b's fill.
    expect(b.counters()?.busEvictions).toBe(2);
    expect(c.counters()?.busEvictions).toBe(3);
    expect(a.counters()?.busEvictions).toBe(1);
  });

  it('ignores its own messages', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    expect(a.remote.calls.publish).toBe(1);
    expect(a.local.get('k')?.value).toBe('v');
    expect(a.counters()?.busEvictions).toBe(0);
  });

  it('ignores messages of unknown kinds and malformed ones', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
    store.deliver('someone|x|k');
    store.deliver('someone|t|');
    store.deliver('garbage');
    expect(a.local.get('k')?.value).toBe('v');
    store.deliver('someone|k|k');
    expect(a.local.get('k')).toBeUndefined();
  });

  it('clears L1 when the bus reconnects, counts it and emits bus-recovery', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    try {
      await setValue(a.cache, 'k', 'v', { ttl: 60_000 });
      await setValue(a.cache, 'j', 'v', { ttl: 60_000 });
      store.disconnect();
      expect(a.local.size).toBe(2); // the localTtl bound holds while the bus is down
      store.reconnect();
      expect(a.local.size).toBe(0);
      expect(a.counters()?.busRecoveries).toBe(1);
      expect(events).toContainEqual({ type: 'bus-recovery', cache: a.name });
      // Reads fill L1 again afterwards.
      expect(await getValue(a.cache, 'k')).toBe('v');
      expect(a.local.get('k')?.value).toBe('v');
    } finally {
      off();
    }
  });

  it('clears a local cache without clear() by the keys it put there', async () => {
    const store = new RemoteStore();
    const base = localCache();
    const { clear: _clear, ...local } = base;
    const cache = createTieredCache({ local, remote: remoteCache(store), name: 'no-clear' });
    await setValue(cache, 'k', 'v', { ttl: 60_000 });
    store.reconnect();
    expect(base.get('k')).toBeUndefined();
  });

  it('stops listening on close()', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    expect(store.subscribers.size).toBe(1);
    a.cache.close();
    expect(store.subscribers.size).toBe(0);
  });

  it('an invalidation, a tag invalidation or a setValue resolves once every other replica applied it', async () => {
    const store = new RemoteStore();
    store.countsReceivers = true; // as Redis's PUBLISH
    const [a, b] = [replica(store, { tags: true }), replica(store, { tags: true })];
    const changes = [
      () => invalidate(a.cache, 'k'),
      () => invalidateTag(a.cache, 'group'),
      () => setValue(a.cache, 'k', 'new', { ttl: 60_000, tags: ['group'] }),
    ];
    for (const change of changes) {
      await setValue(a.cache, 'k', 'old', { ttl: 60_000, tags: ['group'] });
      vi.advanceTimersByTime(1);
      expect(await getValue(b.cache, 'k')).toBe('old');
      store.hold = true; // the message is on its way
      let resolved = false;
      const changed = change().then(() => {
        resolved = true;
      });
      await flush();
      expect(resolved).toBe(false);
      store.release(); // b hears it, applies it and answers
      await changed;
      expect(b.local.get('k')).toBeUndefined();
      vi.advanceTimersByTime(1);
    }
  });

  it('counts the acknowledgements of the tiered caches behind one connection once, as the publish counts it', async () => {
    const store = new RemoteStore();
    store.countsReceivers = true;
    // Process P: two tiered caches on one remote (one subscriber connection); process Q: one, slow.
    const shared = remoteCache(store, { connection: 'P' });
    const tiered = (remote: ReturnType<typeof remoteCache>) =>
      createTieredCache({ local: localCache(), remote, name: `tiered-${++names}` });
    const [t1, t2] = [tiered(shared), tiered(shared)];
    const q = replica(store);
    for (const run of [() => invalidate(t1, 'k'), () => setValue(t2, 'k', 'new', { ttl: 60_000 })]) {
      await setValue(t1, 'k', 'old', { ttl: 60_000 });
      vi.advanceTimersByTime(1);
      expect(await getValue(q.cache, 'k')).toBe('old');
      store.slow.add(q.remote);
      let resolved = false;
      const changed = run().then(() => {
        resolved = true;
      });
      await flush();
      // The other cache behind P's connection has answered; Q, the one other receiver, has not.
      expect(resolved).toBe(false);
      store.slow.delete(q.remote);
      store.catchUp();
      await changed;
      expect(q.local.get('k')?.value).not.toBe('old');
      vi.advanceTimersByTime(1);
    }
  });

  // What another replica's call changes, as a list: each replica pair starts afresh.
  const changes = [
    { name: 'invalidate', run: (cache: Cache) => invalidate(cache, 'k') },
    { name: 'invalidateTag', run: (cache: Cache) => invalidateTag(cache, 'group') },
    {
      name: 'setValue',
      run: (cache: Cache) => setValue(cache, 'k', 'new', { ttl: 60_000, tags: ['group'] }),
    },
  ];
  const tagged = { ttl: 60_000, tags: ['group'] };

  it.each(changes)(
    "after $name on one replica, the other's fill that answered but is still writing answers no later caller",
    async ({ run }) => {
      const store = new RemoteStore();
      store.countsReceivers = true;
      const [a, b] = [replica(store, { tags: true }), replica(store, { tags: true })];
      b.remote.holdWrites = true;
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'old')).toBe('old');
      expect(inFlightCount(b.cache)).toBe(1); // its write is on its way
      vi.advanceTimersByTime(1);
      await run(a.cache);
      vi.advanceTimersByTime(1); // a fill of the invalidation's millisecond counts as before it
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'new')).toBe('new');
      b.remote.releaseWrites();
      await settled(b.cache);
      expect(await getValue(b.cache, 'k')).toBe('new');
      expect(await getValue(a.cache, 'k')).toBe('new');
    },
  );

  it.each(changes)(
    "after $name on one replica while the other's bus was down, nothing in flight there from before answers a caller once it is back",
    async ({ run }) => {
      const store = new RemoteStore();
      const [a, b] = [replica(store, { tags: true }), replica(store, { tags: true })];
      b.remote.holdWrites = true;
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'old')).toBe('old');
      expect(inFlightCount(b.cache)).toBe(1); // its write is on its way
      store.disconnect();
      store.hold = true; // messages sent now are lost
      vi.advanceTimersByTime(1);
      await run(a.cache);
      store.held.splice(0);
      store.hold = false;
      store.reconnect(); // b missed the change: it cannot tell which keys it touched
      vi.advanceTimersByTime(1);
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'new')).toBe('new');
      b.remote.releaseWrites();
      await settled(b.cache);
      expect(await getValue(b.cache, 'k')).toBe('new');
    },
  );

  it.each(changes)(
    "after $name on one replica, the other's read in flight (begun before it) answers no later caller",
    async ({ run }) => {
      const store = new RemoteStore();
      store.countsReceivers = true;
      const [a, b] = [replica(store, { tags: true }), replica(store, { tags: true })];
      await setValue(a.cache, 'k', 'old', tagged);
      vi.advanceTimersByTime(1);
      b.remote.holdReads = true; // the remote has answered 'old'; the answer is on its way
      const before = getOrComputeWith(b.cache, 'k', tagged, () => 'unused');
      await flush();
      await run(a.cache);
      const after = getOrComputeWith(b.cache, 'k', tagged, () => 'new');
      await flush();
      b.remote.releaseReads();
      expect(await before).toBe('old'); // it began before the change
      expect(await after).toBe('new');
    },
  );

  it('waits for a replica that does not answer (an older version) BUS_ACK_TIMEOUT_MS at most; a fill never', async () => {
    const store = new RemoteStore();
    store.countsReceivers = true;
    const [a, b] = [replica(store), replica(store)];
    store.subscribers.add({ message: () => {} });
    expect(await getOrCompute(a.cache, 'filled', 60_000, () => 1)).toBe(1);
    await settled(a.cache); // the fill's write and message: no wait
    let resolved = false;
    const changed = setValue(a.cache, 'k', 'v', { ttl: 60_000 }).then(() => {
      resolved = true;
    });
    await vi.advanceTimersByTimeAsync(BUS_ACK_TIMEOUT_MS - 1);
    expect(resolved).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await changed;
    expect(b.counters()?.busEvictions).toBe(2);
  });

  it('works without a bus: copies last localTtl', async () => {
    const store = new RemoteStore();
    const a = replica(store, { bus: false, localTtl: 1_000 });
    const b = replica(store, { bus: false, localTtl: 1_000 });
    await setValue(a.cache, 'k', 'old', { ttl: 60_000 });
    expect(await getValue(b.cache, 'k')).toBe('old');
    await setValue(a.cache, 'k', 'new', { ttl: 60_000 });
    expect(await getValue(b.cache, 'k')).toBe('old');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await getValue(b.cache, 'k')).toBe('new');
  });
});

describe('writes after an L1 delete', () => {
  it('follow the remote: a write the remote stored is kept in L1 even after an L1 eviction', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const now = Date.now();
    await a.cache.set('order', entry('newer', now, 60_000), { ttl: 60_000 });
    vi.advanceTimersByTime(5);
    // Refused by the remote: L1 drops its copy (and its deletion record is newer than `now + 1`).
    expect(await a.cache.set('order', entry('older', now - 1_000, 60_000), { ttl: 60_000 })).toBe(false);
    expect((await a.cache.get('order'))?.value).toBe('newer');
    expect(await a.cache.set('order', entry('newest', now + 1, 60_000), { ttl: 60_000 })).toBe(true);
    expect(a.local.get('order')?.value).toBe('newest');
    expect((await a.cache.get('order'))?.value).toBe('newest');
  });
});

describe('fail-safe through a tiered cache', () => {
  /** A fill whose source is down. */
  const databaseDown = () =>
    vi.fn((): string => {
      throw new Error('database down');
    });

  it('a failed fill answers with the previous value, re-armed in L2 and L1, and the other replica backs off too', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    const options = { ttl: 1_000, failSafe: { maxStale: '1h', throttle: 5_000 } } as const;
    expect(await getOrComputeWith(a.cache, 'k', options, () => 'v1')).toBe('v1');
    await settled(a.cache);
    expect(await getOrComputeWith(b.cache, 'k', options, () => 'unused')).toBe('v1');
    await vi.advanceTimersByTimeAsync(1_500); // expired everywhere, still held for fail-safe
    const failing = databaseDown();
    expect(await getOrComputeWith(a.cache, 'k', options, failing)).toBe('v1');
    await settled(a.cache);
    expect(failing).toHaveBeenCalledTimes(1);
    expect(a.counters()?.failSafeActivations).toBe(1);
    // Re-armed fresh for throttle in the remote cache: the other replica (its L1 copy evicted by the
    // write's bus message) reads it there and tries the source no more than this one does.
    const other = vi.fn(() => 'v2');
    expect(await getOrComputeWith(b.cache, 'k', options, other)).toBe('v1');
    expect(other).not.toHaveBeenCalled();
    expect(await getOrComputeWith(a.cache, 'k', options, failing)).toBe('v1');
    expect(failing).toHaveBeenCalledTimes(1);
    // Past the throttle the source is tried again, and its value travels as usual.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await getOrComputeWith(b.cache, 'k', options, other)).toBe('v2');
    expect(other).toHaveBeenCalledTimes(1);
    await settled(b.cache);
    expect(await getOrComputeWith(a.cache, 'k', options, failing)).toBe('v2');
    expect(failing).toHaveBeenCalledTimes(1);
  });

  it('with the remote and the source both down, an L1 copy past its grace but within maxStale is the fallback, on the replica that filled and on one that read it', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    const options = {
      ttl: 1_000,
      staleWhileRevalidate: 2_000,
      failSafe: { maxStale: '1h', throttle: 5_000 },
    } as const;
    expect(await getOrComputeWith(a.cache, 'k', options, () => 'v1')).toBe('v1');
    await settled(a.cache);
    expect(await getOrComputeWith(b.cache, 'k', options, () => 'unused')).toBe('v1');
    await vi.advanceTimersByTimeAsync(10_000); // past the grace, within localTtl and maxStale
    store.down = true;
    const failing = databaseDown();
    for (const r of [a, b]) {
      expect(await getOrComputeWith(r.cache, 'k', options, failing)).toBe('v1');
      await settled(r.cache);
      expect(r.counters()?.failSafeActivations).toBe(1);
      // Re-armed in L1 (the remote write failed): the source is not tried again within the throttle.
      expect(await getOrComputeWith(r.cache, 'k', options, failing)).toBe('v1');
    }
    expect(failing).toHaveBeenCalledTimes(2);
    // Without fail-safe such a copy is a miss as before: the failure stands.
    await vi.advanceTimersByTimeAsync(10_000);
    await expect(getOrComputeWith(b.cache, 'k', { ttl: 1_000 }, failing)).rejects.toThrow('database down');
  });

  it('with the remote down, an L1 copy past maxStale, or older than localTtl, is no fallback', async () => {
    const store = new RemoteStore();
    const a = replica(store, { localTtl: 30_000 });
    const options = { ttl: 1_000, failSafe: { maxStale: '10s', throttle: 5_000 } } as const;
    const failing = databaseDown();
    expect(await getOrComputeWith(a.cache, 'k', options, () => 'v1')).toBe('v1');
    await settled(a.cache);
    await vi.advanceTimersByTimeAsync(11_000); // past freshness + maxStale, still in L1
    store.down = true;
    await expect(getOrComputeWith(a.cache, 'k', options, failing)).rejects.toThrow('database down');
    store.down = false;
    const long = { ttl: 1_000, failSafe: { maxStale: '1h', throttle: 5_000 } } as const;
    expect(await getOrComputeWith(a.cache, 'j', long, () => 'v1')).toBe('v1');
    await settled(a.cache);
    await vi.advanceTimersByTimeAsync(31_000); // within maxStale, but L1 has dropped it
    store.down = true;
    await expect(getOrComputeWith(a.cache, 'j', long, failing)).rejects.toThrow('database down');
  });

  it("another replica's setValue, heard a moment after it was made, is a previous value there too", async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const b = replica(store);
    const options = {
      ttl: 1_000,
      staleWhileRevalidate: 10_000,
      failSafe: { maxStale: '1h', throttle: 5_000 },
    } as const;
    expect(await getOrComputeWith(b.cache, 'k', options, () => 'old')).toBe('old');
    await settled(b.cache);
    store.hold = true; // the bus message takes a few milliseconds
    await setValue(a.cache, 'k', 'new', { ttl: 1_000, staleWhileRevalidate: 10_000 });
    vi.advanceTimersByTime(5);
    store.release();
    expect(await getOrComputeWith(b.cache, 'k', options, () => 'unused')).toBe('new');
    await vi.advanceTimersByTimeAsync(1_500); // stale: read during a refresh that fails
    const failing = databaseDown();
    expect(await getOrComputeWith(b.cache, 'k', options, failing)).toBe('new');
    await settled(b.cache);
    expect(failing).toHaveBeenCalledTimes(1);
    // The failed refresh re-armed a's value for `throttle`, as it would have b's own.
    expect(b.counters()?.failSafeActivations).toBe(1);
    expect(await getOrComputeWith(b.cache, 'k', options, failing)).toBe('new');
    expect(failing).toHaveBeenCalledTimes(1);
  });
});
