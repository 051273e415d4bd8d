import type { Cache, CacheEntry, CacheSetOptions, FillLock, FillOutcome } from '@stampede/core';

/** What a Map cache keeps. Two caches on one store behave as two replicas of one backend. */
export interface MapStore {
  entries: Map<string, { entry: CacheEntry; expiresAt: number }>;
  /** When each key was last deleted: a fill that started earlier must not write it back. */
  deletedAt: Map<string, number>;
  locks: Map<string, { token: symbol; expiresAt: number }>;
  listeners: Map<string, Set<(outcome: FillOutcome) => void>>;
}

/** Options of {@link createMapCache}. */
export interface MapCacheOptions {
  /**
   * The backend. Caches given the same store share entries, locks and fill-done listeners.
   * @default a new store
   */
  store?: MapStore;
  /**
   * The cache's name in stats and metrics.
   * @default 'map'
   */
  name?: string;
}

/** A new, empty store for {@link createMapCache}. */
export function createMapStore(): MapStore {
  return { entries: new Map(), deletedAt: new Map(), locks: new Map(), listeners: new Map() };
}

/** A stampede `Cache` on plain `Map`s, with a fill lock (and `extend`) and push wake-up. */
export function createMapCache(options: MapCacheOptions = {}): Cache {
  const { entries, deletedAt, locks, listeners } = options.store ?? createMapStore();

  const read = (key: string) => {
    const stored = entries.get(key);
    if (stored !== undefined && stored.expiresAt <= Date.now()) {
      entries.delete(key); // Past its physical TTL.
      return undefined;
    }
    return stored;
  };
  const holds = (key: string, token: symbol): boolean => {
    const lock = locks.get(key);
    return lock !== undefined && lock.token === token && lock.expiresAt > Date.now();
  };

  return {
    name: options.name ?? 'map',
    get(key) {
      return read(key)?.entry;
    },
    set(key: string, entry: CacheEntry, { ttl, direct }: CacheSetOptions): boolean {
      // A fill that started before the last delete must not bring the key back. A direct write
      // (`setValue`) comes after every delete its caller knows of, and a write in the same
      // millisecond as the delete is let through: `invalidate` then `setValue` must store.
      const deleted = deletedAt.get(key);
      if (direct !== true && deleted !== undefined && entry.createdAt < deleted) return false;
      // Never older: a newer entry stays (a tie goes to the write).
      const existing = read(key);
      if (existing !== undefined && existing.entry.createdAt > entry.createdAt) return false;
      const now = Date.now();
      if ((ttl !== undefined && ttl <= 0) || entry.staleUntil <= now) {
        // Already expired: not stored, but the key must read as a miss from now on.
        entries.delete(key);
        return true;
      }
      // Kept for the physical `ttl`, which may outlive `staleUntil` (fail-safe reads it then).
      entries.set(key, { entry, expiresAt: ttl === undefined ? Number.POSITIVE_INFINITY : now + ttl });
      return true;
    },
    delete(key) {
      entries.delete(key);
      deletedAt.set(key, Date.now());
    },
    tryAcquireFillLock(key, ttl): FillLock | undefined {
      const current = locks.get(key);
      if (current !== undefined && current.expiresAt > Date.now()) return undefined;
      // Only this grant's handle can release or extend it, even after it lapsed and was re-taken.
      const token = Symbol(key);
      locks.set(key, { token, expiresAt: Date.now() + ttl });
      return {
        release(outcome) {
          if (holds(key, token)) locks.delete(key);
          // The fill ended either way: waiters re-check the cache.
          for (const listener of [...(listeners.get(key) ?? [])]) {
            try {
              listener(outcome);
            } catch {
              // One listener's fault must not keep the others waiting.
            }
          }
        },
        extend(next) {
          if (!holds(key, token)) return false;
          locks.set(key, { token, expiresAt: Date.now() + next });
          return true;
        },
      };
    },
    onFillDone(key, listener) {
      const forKey = listeners.get(key) ?? new Set();
      listeners.set(key, forKey);
      forKey.add(listener);
      return () => {
        forKey.delete(listener);
      };
    },
  };
}
