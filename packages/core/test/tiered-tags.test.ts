import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheEntry,
  createTieredCache,
  getOrComputeWith,
  getValue,
  invalidateTag,
  invalidateTags,
  resetStats,
  setValue,
  statsByCache,
} from '../src/index.js';
import { flush } from './helpers.js';
import { type Log, localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

let names = 0;
/** A replica whose remote can invalidate tags: its own L1 and tiered cache, on the shared `store`. */
function replica(store: RemoteStore, log: Log = []) {
  const local = localCache(log);
  const remote = remoteCache(store, { tags: true, log });
  const name = `tiered-tags-${++names}`;
  const cache = createTieredCache({ local, remote, name });
  const counters = () => statsByCache()[name];
  return { cache, local, remote, name, counters, log };
}

const tagged = { ttl: 60_000, tags: ['g'] } as const;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a tiered cache with tags', () => {
  it('invalidates tags exactly when the remote can', async () => {
    const store = new RemoteStore();
    const plain = createTieredCache({ local: localCache(), remote: remoteCache(store), name: 'untagged' });
    expect(plain.invalidateTags).toBeUndefined();
    await expect(invalidateTag(plain, 'g')).rejects.toThrow(/cache 'untagged' cannot invalidate tags/);
    expect(replica(store).cache.invalidateTags).toBeTypeOf('function');
  });

  it('invalidates the remote, then L1, then publishes the encoded tags', async () => {
    const store = new RemoteStore();
    const log: Log = [];
    const a = replica(store, log);
    await setValue(a.cache, 'k', 'v', tagged);
    log.length = 0;
    await invalidateTags(a.cache, ['g', 'a|b,c']);
    expect(log).toEqual([
      'remote.invalidateTags g,a|b,c',
      'local.invalidateTags g,a|b,c',
      'publish t|g,a%7Cb%2Cc',
    ]);
    expect(a.local.get('k')).toBeUndefined();
    expect(await getValue(a.cache, 'k')).toBeUndefined();
  });

  it("drops the other replicas' tagged L1 copies on the message; untagged and other tags stay L1 hits", async () => {
    const store = new RemoteStore();
    const [a, b, c] = [replica(store), replica(store), replica(store)];
    await setValue(a.cache, 'k', 'old', tagged);
    await setValue(a.cache, 'odd', 'old', { ttl: 60_000, tags: ['a|b,c'] });
    await setValue(a.cache, 'other', 'x', { ttl: 60_000, tags: ['h'] });
    await setValue(a.cache, 'plain', 'p', { ttl: 60_000 });
    for (const r of [b, c]) {
      for (const key of ['k', 'odd', 'other', 'plain']) await getValue(r.cache, key);
      expect(r.local.size).toBe(4);
    }
    vi.advanceTimersByTime(10);
    await invalidateTags(a.cache, ['g', 'a|b,c']);
    for (const r of [b, c]) {
      const reads = r.remote.calls.get;
      // L1 answers for the untouched entries, with no remote command.
      expect(await getValue(r.cache, 'other')).toBe('x');
      expect(await getValue(r.cache, 'plain')).toBe('p');
      expect(r.remote.calls.get).toBe(reads);
      // The invalidated ones are gone from L1, and the remote has none either.
      expect(r.local.get('k')).toBeUndefined();
      expect(r.local.get('odd')).toBeUndefined();
      expect(await getValue(r.cache, 'k')).toBeUndefined();
      expect(await getValue(r.cache, 'odd')).toBeUndefined();
      expect(r.counters()?.busEvictions).toBe(5); // a's four writes and its tag message
      expect(r.counters()?.tagInvalidations).toBe(0);
      // The message reached the local cache as tags, not as a command to the remote.
      expect(r.remote.calls.tags).toBe(0);
    }
    expect(a.counters()?.tagInvalidations).toBe(2);
    expect(a.counters()?.busEvictions).toBe(0);
    expect(a.remote.calls.tags).toBe(1);
  });

  it('keeps a copy refilled after the invalidation but before the message arrived (no refetch loop)', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    await setValue(a.cache, 'k', 'old', tagged);
    vi.advanceTimersByTime(10);
    store.hold = true; // the bus is slow
    await invalidateTag(a.cache, 'g');
    vi.advanceTimersByTime(10);
    // b has no copy yet: it misses in the remote (the tag is invalidated there) and refills.
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'new')).toBe('new');
    await flush();
    expect(b.local.get('k')?.value).toBe('new');
    vi.advanceTimersByTime(10);
    // Then the message arrives: b's L1 cannot tell its copy from an older one, and drops it...
    store.release();
    expect(b.local.get('k')).toBeUndefined();
    vi.advanceTimersByTime(10);
    // ...reads it once more from the remote, and keeps that copy: the next reads are L1 hits.
    const reads = b.remote.calls.get;
    for (let i = 0; i < 3; i++)
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'never')).toBe('new');
    expect(b.remote.calls.get).toBe(reads + 1);
    expect(b.counters()?.l2Hits).toBe(1);
    expect(b.counters()?.l1Hits).toBeGreaterThanOrEqual(2);
  });

  it('does not keep in L1 a remote read that was in flight when the tags were invalidated', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    await setValue(a.cache, 'k', 'old', tagged);
    vi.advanceTimersByTime(10);
    b.remote.holdReads = true;
    const pending = b.cache.get('k'); // reads the old entry, answers later
    vi.advanceTimersByTime(10);
    await invalidateTag(a.cache, 'g');
    vi.advanceTimersByTime(10);
    b.remote.releaseReads();
    // The read started before the invalidation: its caller may get the old value...
    expect((await pending)?.value).toBe('old');
    // ...but L1 does not keep it, and the next read finds nothing.
    expect(b.local.get('k')).toBeUndefined();
    expect(await getValue(b.cache, 'k')).toBeUndefined();
  });

  it('a setValue on the replica whose own read of the key is in flight: L1 keeps the value set, not the read', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    await setValue(a.cache, 'k', 'old', tagged);
    a.local.delete('k');
    a.remote.holdReads = true;
    // In one millisecond: a read of the key (it reads 'old', answers later), then a setValue.
    const read = getOrComputeWith(a.cache, 'k', tagged, () => 'filled');
    const set = setValue(a.cache, 'k', 'new', tagged);
    await flush();
    a.remote.releaseReads();
    expect(await read).toBe('old');
    await set;
    expect(await getValue(a.cache, 'k')).toBe('new');
    expect(a.local.get('k')?.value).not.toBe('old');
  });

  it('an invalidation of other tags while a read is in flight leaves its answer to L1 (no refetch on every read)', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    await setValue(a.cache, 'k', 'v', tagged);
    a.local.delete('k');
    a.remote.holdReads = true;
    const pending = a.cache.get('k');
    await invalidateTag(b.cache, 'other');
    a.remote.releaseReads();
    expect((await pending)?.value).toBe('v');
    expect(a.local.get('k')?.value).toBe('v');
  });

  it('takes its own stored write into L1 over a copy stamped with a later read time', async () => {
    const store = new RemoteStore();
    const b = replica(store);
    const start = Date.now();
    const at = (value: unknown, createdAt: number): CacheEntry => ({
      value,
      createdAt,
      freshUntil: createdAt + 60_000,
      staleUntil: createdAt + 60_000,
      tags: ['g'],
    });
    store.write('k', at('first', start), 60_000);
    vi.advanceTimersByTime(100);
    // The copy counts as created when the read started (start + 100).
    expect((await b.cache.get('k'))?.value).toBe('first');
    expect(b.local.get('k')?.createdAt).toBe(start + 100);
    // A fill of this replica that started before that read writes: the remote stores it, so L1 must
    // hold it too (read-your-writes), even though its createdAt is older than the copy's.
    expect(await b.cache.set('k', at('second', start + 50), { ttl: 60_000 })).toBe(true);
    expect(b.local.get('k')?.value).toBe('second');
    expect((await b.cache.get('k'))?.value).toBe('second');
  });

  it('stamps a copy no later than its read, even when the entry says it was created after it', async () => {
    // A remote entry's createdAt comes back through an estimate of the server's clock, which can
    // put it a little after this replica's read: the copy must still count as read before any
    // invalidation this replica learns of later.
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    const readAt = Date.now();
    store.write(
      'k',
      {
        value: 'old',
        createdAt: readAt + 50,
        freshUntil: readAt + 60_000,
        staleUntil: readAt + 60_000,
        tags: ['g'],
      },
      60_000,
    );
    expect(await getValue(b.cache, 'k')).toBe('old');
    expect(b.local.get('k')?.createdAt).toBe(readAt);
    vi.advanceTimersByTime(10);
    await invalidateTag(a.cache, 'g');
    // L1 dropped its copy: the next read asks the remote (whose own check is on the server's clock).
    expect(b.local.get('k')).toBeUndefined();
  });

  it('clears a local cache that cannot invalidate tags', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    const base = localCache();
    const { invalidateTags: _ignored, ...local } = base;
    const b = createTieredCache({ local, remote: remoteCache(store, { tags: true }), name: 'no-local-tags' });
    await setValue(a.cache, 'k', 'v', tagged);
    await setValue(a.cache, 'plain', 'p', { ttl: 60_000 });
    await getValue(b, 'k');
    await getValue(b, 'plain');
    expect(base.size).toBe(2);
    vi.advanceTimersByTime(10);
    await invalidateTag(a.cache, 'g');
    expect(base.size).toBe(0);
    expect(await getValue(b, 'k')).toBeUndefined();
    expect(await getValue(b, 'plain')).toBe('p');
  });

  it('rejects and leaves L1 and the bus alone when the remote fails', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    await setValue(a.cache, 'k', 'v', tagged);
    await getValue(b.cache, 'k');
    const publishes = a.remote.calls.publish;
    store.down = true;
    await expect(invalidateTag(a.cache, 'g')).rejects.toThrow('remote down');
    store.down = false;
    expect(a.remote.calls.publish).toBe(publishes);
    expect(a.local.get('k')?.value).toBe('v');
    expect(b.local.get('k')?.value).toBe('v');
    expect(a.counters()?.tagInvalidations).toBe(0);
    expect(a.counters()?.backendErrors).toBe(1);
  });

  it('a tagged fill on a replica carries its tags into every L1', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    expect(await getOrComputeWith(a.cache, 'k', tagged, () => 'v')).toBe('v');
    await flush();
    expect(await getValue(b.cache, 'k')).toBe('v');
    expect(a.local.get('k')?.tags).toEqual(['g']);
    expect(b.local.get('k')?.tags).toEqual(['g']);
  });
});
