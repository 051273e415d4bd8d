import type { Cache, CacheEntry, CacheSetOptions } from '@stampede/core';
import { LRUCache } from 'lru-cache';

/** Options of {@link createMemoryCache}. */
export interface MemoryCacheOptions {
  /**
   * Most entries kept; the least recently used goes first. Ignored when `lru` is given.
   * @default 10000
   */
  max?: number;
  /** The cache's name in stats, events and metric labels. @default 'memory' */
  name?: string;
  /**
   * An `LRUCache` you already own, to use instead of a new one (its own `max`, `maxSize`, `dispose`
   * ... apply). Stampede stores {@link CacheEntry} objects in it.
   */
  lru?: LRUCache<string, CacheEntry>;
}

/** An in-process {@link Cache} on lru-cache. */
export interface MemoryCache extends Cache {
  readonly name: string;
  /** Reads synchronously: a hit never waits for a promise. */
  get(key: string): CacheEntry | undefined;
  /** Writes synchronously, unless a newer entry is already there. */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): void;
  /** Deletes synchronously. */
  delete(key: string): void;
  /** The underlying `LRUCache`. */
  readonly lru: LRUCache<string, CacheEntry>;
  /** How many entries it holds (expired ones included until they are touched or evicted). */
  readonly size: number;
  /** Drops every entry. */
  clear(): void;
}

// lru-cache's clock must agree with the envelope's (Date.now), so a physical expiry never
// precedes the logical one and fake timers move both.
const wallClock = { now: () => Date.now() };

/**
 * An in-process cache on lru-cache. Values are stored as they are (no serialisation, so a hit is
 * a map lookup); each entry's physical TTL is `ttl + staleWhileRevalidate`.
 *
 * @example
 * const cache = createMemoryCache({ max: 50_000 });
 * const count = await getOrCompute(cache, 'bookmark_count', '30s', countBookmarks);
 */
export function createMemoryCache(options: MemoryCacheOptions = {}): MemoryCache {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const { max = 10_000, name = 'memory', lru: given } = options;
  if (typeof name !== 'string' || name.length === 0)
    throw new TypeError('options.name must be a non-empty string');
  if (given !== undefined && !(given instanceof LRUCache)) {
    throw new TypeError('options.lru must be an LRUCache from lru-cache');
  }
  if (given === undefined && (!Number.isInteger(max) || max < 1)) {
    throw new RangeError(`options.max must be a positive integer; got ${String(max)}`);
  }
  const lru = given ?? new LRUCache<string, CacheEntry>({ max, perf: wallClock });

  return {
    name,
    lru,
    get size() {
      return lru.size;
    },
    get(key: string): CacheEntry | undefined {
      return lru.get(key);
    },
    set(key: string, entry: CacheEntry, { ttl }: CacheSetOptions): void {
      if (ttl === 0) return;
      const existing = lru.peek(key);
      if (existing !== undefined && existing.createdAt > entry.createdAt) return;
      lru.set(key, entry, { ttl });
    },
    delete(key: string): void {
      lru.delete(key);
    },
    clear(): void {
      lru.clear();
    },
  };
}
