import type { Cache, CacheEntry, CacheSetOptions } from '@stampede/core';
import { shouldReplace } from '@stampede/core/adapter';
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
  /**
   * Writes synchronously, unless a newer entry is already there or the key was deleted (or the
   * cache cleared) after `entry.createdAt`. An already expired entry (physical `ttl` of 0, or
   * `staleUntil` not after now) removes what is stored instead, unless that is newer.
   * @returns `false` when the write was refused, else `true`
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): boolean;
  /**
   * Deletes synchronously. A fill that started before the delete cannot write its value back; one
   * that started in the same millisecond can (see the README, "Deletes and in-flight fills").
   */
  delete(key: string): void;
  /** The underlying `LRUCache`. */
  readonly lru: LRUCache<string, CacheEntry>;
  /** How many entries it holds (expired ones included until they are touched or evicted). */
  readonly size: number;
  /** Drops every entry; as with {@link MemoryCache.delete}, no fill that started before it writes back. */
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

  // When each key was last deleted, so a fill that started before the delete (and writes after it)
  // cannot bring the old value back. Bounded like the cache; a record pushed out raises `floor`,
  // which then refuses every write whose fill started before that deletion: a refused write costs
  // at most one more fill later, a forgotten delete would serve an invalidated value.
  // Only `set` reads these, so the hit path pays nothing for them.
  let floor = Number.NEGATIVE_INFINITY;
  const deletions = new LRUCache<string, number>({
    max: lru.max > 0 ? lru.max : max,
    dispose: (deletedAt, _key, reason) => {
      if (reason === 'evict' && deletedAt > floor) floor = deletedAt;
    },
  });
  // Date.now() cannot order a fill and a delete of the same millisecond. The tie goes to the write:
  // `delete` then `set` (or `invalidate` then `setValue`) within one millisecond must store. A fill
  // that started less than 1 ms before a delete may thus still write; core's `invalidate` closes
  // even that gap for this process's fills, as it stops them from writing at all.
  const deletedAfter = (key: string, createdAt: number): boolean => {
    if (createdAt < floor) return true;
    const deletedAt = deletions.peek(key);
    return deletedAt !== undefined && createdAt < deletedAt;
  };

  return {
    name,
    lru,
    get size() {
      return lru.size;
    },
    get(key: string): CacheEntry | undefined {
      return lru.get(key);
    },
    set(key: string, entry: CacheEntry, { ttl, direct }: CacheSetOptions): boolean {
      // A direct write (setValue) comes after every delete its caller knows of: only fills are
      // refused by a delete newer than their start.
      if (direct !== true && deletedAfter(key, entry.createdAt)) return false;
      if (!shouldReplace(lru.peek(key), entry)) return false;
      // An expired entry still replaces an older one: it is what the writer (say `setValue` with
      // ttl 0) wants the next read to see, and that is a miss.
      if ((ttl !== undefined && !(ttl > 0)) || !(entry.staleUntil > Date.now())) lru.delete(key);
      else lru.set(key, entry, { ttl });
      return true;
    },
    delete(key: string): void {
      lru.delete(key);
      const now = Date.now();
      const previous = deletions.peek(key);
      deletions.set(key, previous !== undefined && previous > now ? previous : now);
    },
    clear(): void {
      lru.clear();
      deletions.clear();
      const now = Date.now();
      if (now > floor) floor = now;
    },
  };
}
