import type { Cache, CacheEntry, CacheSetOptions, FillLock, FillOutcome } from '@stampede/core';

/** Options of {@link createMapCache}. */
export interface MapCacheOptions {
  /**
   * The shared store. Two caches given the same store act as two replicas of one backend.
   * @default a new store
   */
  store?: MapStore;
  /** @default 'map' */
  name?: string;
}

/** What a Map cache keeps: entries, deletion times, locks and fill-done listeners. */
export interface MapStore {
  entries: Map<string, { entry: CacheEntry; expiresAt: number }>;
  deletedAt: Map<string, number>;
  locks: Map<string, { token: symbol; expiresAt: number }>;
  listeners: Map<string, Set<(outcome: FillOutcome) => void>>;
}

/** A new, empty store for {@link createMapCache}. */
export function createMapStore(): MapStore {
  return { entries: new Map(), deletedAt: new Map(), locks: new Map(), listeners: new Map() };
}

/** A stampede `Cache` on a plain `Map`, with a fill lock and push wake-up inside one process. */
export function createMapCache(options: MapCacheOptions = {}): Cache {
  const store = options.store ?? createMapStore();
  const { entries, deletedAt, locks, listeners } = store;

  const read = (key: string) => {
    const stored = entries.get(key);
    if (stored !== undefined && stored.expiresAt <= Date.now()) {
      entries.delete(key); // Past its physical TTL.
      return undefined;
    }
    return stored;
  };
  const heldBy = (key: string, token: symbol): boolean => {
    const lock = locks.get(key);
    return lock !== undefined && lock.token === token && lock.expiresAt > Date.now();
  };

  return {
    name: options.name ?? 'map',
    get(key) {
      return read(key)?.entry;
    },
    set(key: string, entry: CacheEntry, { ttl }: CacheSetOptions) {
      // A fill that started before the last delete must not bring the key back.
      const deleted = deletedAt.get(key);
      if (deleted !== undefined && entry.createdAt < deleted) return;
      // Never older: a newer entry stays.
      const existing = read(key);
      if (existing !== undefined && existing.entry.createdAt > entry.createdAt) return;
      const now = Date.now();
      if ((ttl !== undefined && ttl <= 0) || entry.staleUntil <= now) {
        entries.delete(key); // Already expired: the key reads as a miss.
        return;
      }
      entries.set(key, { entry, expiresAt: ttl === undefined ? Number.POSITIVE_INFINITY : now + ttl });
    },
    delete(key) {
      entries.delete(key);
      deletedAt.set(key, Date.now());
    },
    tryAcquireFillLock(key, ttl): FillLock | undefined {
      const current = locks.get(key);
      if (current !== undefined && current.expiresAt > Date.now()) return undefined;
      const token = Symbol(key); // Only this handle can release or extend this grant.
      locks.set(key, { token, expiresAt: Date.now() + ttl });
      return {
        release(outcome) {
          if (heldBy(key, token)) locks.delete(key);
          for (const listener of [...(listeners.get(key) ?? [])]) listener(outcome);
        },
        extend(next) {
          if (!heldBy(key, token)) return false;
          locks.set(key, { token, expiresAt: Date.now() + next });
          return true;
        },
      };
    },
    onFillDone(key, listener) {
      const set = listeners.get(key) ?? new Set();
      listeners.set(key, set);
      set.add(listener);
      return () => {
        set.delete(listener);
      };
    },
  };
}
