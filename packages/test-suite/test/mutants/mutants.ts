import type { Cache, CacheEntry, CacheSetOptions, FillLock } from '@stampede/core';
import { createMapCache, type MapStore } from '../map-cache.js';

// Broken copies of the guide's Map cache, each breaking one rule of the contract (docs/adapters.md):
// the suite must fail every one of them (mutants.test.ts). Each wraps a correct cache and reaches
// into its store only to break its rule.

type Mutant = (store: MapStore) => Cache;

/** The Map cache with its `set` preceded by `before(key, entry, options)`. */
function beforeSet(
  store: MapStore,
  before: (key: string, entry: CacheEntry, options: CacheSetOptions) => CacheSetOptions,
): Cache {
  const cache = createMapCache({ store });
  const set = cache.set.bind(cache);
  return { ...cache, set: (key, entry, options) => set(key, entry, before(key, entry, options)) };
}

/** The Map cache with each lock handle (and its TTL) changed by `change`. */
function withLocks(store: MapStore, change: (lock: FillLock, ttl: number) => FillLock, factor = 1): Cache {
  const cache = createMapCache({ store });
  const acquire = cache.tryAcquireFillLock?.bind(cache);
  if (acquire === undefined) throw new Error('the Map cache has a lock');
  return {
    ...cache,
    tryAcquireFillLock(key, ttl) {
      const lock = acquire(key, ttl * factor) as FillLock | undefined;
      return lock === undefined ? undefined : change(lock, ttl);
    },
  };
}

export const MUTANTS: Readonly<Record<string, Mutant>> = {
  // The correct cache: the suite passes it.
  none: (store) => createMapCache({ store }),
  // Never older only while the stored entry is fresh.
  'older write over a stale newer entry': (store) =>
    beforeSet(store, (key, _entry, options) => {
      const stored = store.entries.get(key)?.entry;
      if (stored !== undefined && Date.now() >= stored.freshUntil) store.entries.delete(key);
      return options;
    }),
  // A re-arm skips the never-older rule.
  're-arm over a newer fill': (store) =>
    beforeSet(store, (key, _entry, options) => {
      if (options.renews !== undefined) store.entries.delete(key);
      return options;
    }),
  // A delete is remembered for a second only.
  'delete forgotten after a second': (store) =>
    beforeSet(store, (key, _entry, options) => {
      const deleted = store.deletedAt.get(key);
      if (deleted !== undefined && Date.now() - deleted > 1_000) store.deletedAt.delete(key);
      return options;
    }),
  // A direct write (setValue) is refused by a delete like a fill.
  'direct write refused by a delete': (store) =>
    beforeSet(store, (_key, _entry, options) => ({ ttl: options.ttl })),
  // The physical TTL counts from the entry's createdAt.
  'ttl from createdAt': (store) =>
    beforeSet(store, (_key, entry, options) =>
      options.ttl === undefined ? options : { ...options, ttl: options.ttl - (Date.now() - entry.createdAt) },
    ),
  // The physical TTL (or none) is capped at 10 minutes.
  'ttl capped': (store) =>
    beforeSet(store, (_key, _entry, options) => ({
      ...options,
      ttl: Math.min(options.ttl ?? 600_000, 600_000),
    })),
  // A failed fill's release keeps the lock.
  "release('failed') keeps the lock": (store) =>
    withLocks(store, (lock) => ({
      ...lock,
      release: (outcome) => (outcome === 'failed' ? undefined : lock.release(outcome)),
    })),
  // A lock lapses at three times its TTL.
  'lock lapses late': (store) => withLocks(store, (lock) => lock, 3),
};
