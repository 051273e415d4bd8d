// Cache objects the core makes stay in V8's fast mode, however many the process makes: in
// dictionary mode every read of their methods is a hash lookup. A tiered cache's live members (its
// lock members and the local tier) were accessors made per cache, which put every tiered cache
// after the first in dictionary mode.
import { hasFastProperties } from '@stampede/test-support';
import { describe, expect, it } from 'vitest';
import { type Cache, type CacheEntry, createTieredCache, type FillLock } from '../src/index.js';

function store(): Cache {
  const entries = new Map<string, CacheEntry>();
  return {
    get: (key) => entries.get(key),
    set: (key, entry) => {
      entries.set(key, entry);
      return true;
    },
    delete: (key) => {
      entries.delete(key);
    },
  };
}

function lockingStore(): Cache & { tryAcquireFillLock: Cache['tryAcquireFillLock'] } {
  const lock: FillLock = { release: () => {} };
  return {
    ...store(),
    tryAcquireFillLock: () => lock,
    tryAcquireFillLockAndRead: () => ({ lock, entry: undefined }),
  };
}

describe('tiered cache objects', () => {
  it('are in fast mode, for every cache made, with and without remote lock members', () => {
    const plain = [1, 2, 3].map(() => createTieredCache({ local: store(), remote: store() }));
    const locking = [1, 2, 3].map(() => createTieredCache({ local: store(), remote: lockingStore() }));
    expect(plain.map((cache) => hasFastProperties(cache))).toEqual([true, true, true]);
    expect(locking.map((cache) => hasFastProperties(cache))).toEqual([true, true, true]);
  });

  it("follow each remote's own lock members, cache by cache", () => {
    const remotes = [lockingStore(), lockingStore()];
    const [first, second] = remotes.map((remote) => createTieredCache({ local: store(), remote }));
    expect([typeof first?.tryAcquireFillLock, typeof second?.tryAcquireFillLock]).toEqual([
      'function',
      'function',
    ]);
    (remotes[0] as { tryAcquireFillLock: unknown }).tryAcquireFillLock = undefined;
    expect([typeof first?.tryAcquireFillLock, typeof second?.tryAcquireFillLock]).toEqual([
      'undefined',
      'function',
    ]);
    expect(Object.keys(second ?? {})).toContain('tryAcquireFillLockAndRead');
  });
});
