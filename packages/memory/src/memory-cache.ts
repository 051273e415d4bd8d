import type { Cache, CacheEntry, CacheSetOptions } from '@stampede/core';
import {
  CHANGES,
  changeEntry,
  checkCacheKey,
  checkCacheWrite,
  checkKnownKeys,
  checkTagList,
  kindOf,
  reportWarning,
  shouldReplace,
} from '@stampede/core/adapter';
import { LRUCache } from 'lru-cache';
import { createLatestTimes } from './latest-times.js';

/** Options of {@link createMemoryCache}. */
export interface MemoryCacheOptions {
  /**
   * Most entries kept; the least recently used goes first. Ignored when `lru` is given. A positive
   * integer up to 2^24 (16,777,216): lru-cache allocates room for `max` entries when the cache is
   * made (about 44 bytes each: 44 MB at a million, 740 MB at the bound), so size it for what you
   * store. (Larger values ended the process with an out-of-memory abort no `catch` could stop.)
   * @default 10000
   */
  max?: number | undefined;
  /** The cache's name in stats, events and metric labels. @default 'memory' */
  name?: string | undefined;
  /**
   * An `LRUCache` you already own, to use instead of a new one (its own `max`, `maxSize`, `dispose`
   * ... apply). Stampede stores {@link CacheEntry} objects in it. With `maxSize` or `maxEntrySize`
   * it needs a `sizeCalculation` (given the stored entry), else a `TypeError`: lru-cache would refuse
   * every write.
   */
  lru?: LRUCache<string, CacheEntry> | undefined;
}

/** An in-process {@link Cache} on lru-cache. */
export interface MemoryCache extends Cache {
  readonly name: string;
  /**
   * Reads synchronously: a hit never waits for a promise.
   * @throws TypeError when `key` is not a non-empty string
   */
  get(key: string): CacheEntry | undefined;
  /**
   * Writes synchronously, unless a newer entry is already there or the key was deleted (or the
   * cache cleared) after `entry.createdAt`. An already expired entry (physical `ttl` of 0, or
   * `staleUntil` not after now) removes what is stored instead, unless that is newer.
   * @returns `false` when the write was refused, else `true`
   * @throws TypeError (RangeError for a negative `entry.delta`) naming the argument when `key` is not
   * a non-empty string, `entry` not a `CacheEntry` or `options` not a `CacheSetOptions` object;
   * nothing is written then
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): boolean;
  /**
   * Deletes synchronously. A fill that started before the delete cannot write its value back; one
   * that started in the same millisecond can (see the README, "Deletes and in-flight fills").
   * @throws TypeError when `key` is not a non-empty string; nothing is deleted then
   */
  delete(key: string): void;
  /** The underlying `LRUCache`. */
  readonly lru: LRUCache<string, CacheEntry>;
  /** How many entries it holds (expired ones included until they are touched or evicted). */
  readonly size: number;
  /** Drops every entry; as with {@link MemoryCache.delete}, no fill that started before it writes back. */
  clear(): void;
  /**
   * Records that `tags` were invalidated at `at` (default now): from then on an entry carrying one
   * of them and created at or before that time reads as a miss. Costs one map write per tag,
   * whatever the number of entries. `at` lets a cache in front of a remote one (tiered) apply an
   * invalidation made elsewhere at the time it was made.
   * @throws TypeError when `tags` is not an array of non-empty strings or `at` not a number,
   * RangeError when `at` is not finite; nothing is recorded then
   */
  invalidateTags(tags: readonly string[], at?: number): void;
}

// lru-cache allocates arrays of `max` slots when it is made (about 44 bytes a slot, measured with
// lru-cache 11): past some 2^25 slots that aborts the process with an out-of-memory error no `catch`
// stops, well below the 2^32 - 1 a JavaScript array could hold. 2^24 is 740 MB up front.
const MAX_ENTRIES = 2 ** 24;

// lru-cache's clock must agree with the envelope's (Date.now), so a physical expiry never
// precedes the logical one and fake timers move both.
const wallClock = { now: () => Date.now() };
// lru-cache's `get` defaults its options to a new `{}` on each call made without them: until the
// caller's code is optimized (a key's first reads after expiry run code that has not seen them),
// that is an allocation on every hit. One empty options object serves every call.
const NO_GET_OPTIONS: LRUCache.GetOptions<string, CacheEntry, unknown> = Object.freeze({});
// How long lru-cache keeps a clock reading for its physical expiry, in ms. Its default (1 ms) arms a
// timer on the first read after every pause longer than that: on a server whose requests come with
// gaps, the first hit of nearly every burst paid a timer (1 to 40 us; 500 hits after a 25 ms pause
// cost 170 ns each instead of 100). A reading kept for a second costs that at most once a second; the
// physical expiry it decides may then come up to a second late, which only holds memory a little
// longer: whether an entry is fresh, stale or gone is decided by the core on its own clock.
const TTL_RESOLUTION_MS = 1_000;

const MEMORY_OPTIONS: ReadonlySet<string> = new Set(['max', 'name', 'lru']);

// `invalidateTags`'s `at`: a `NaN` record would invalidate nothing, an infinite one everything forever.
function checkHeardAt(at: unknown): void {
  if (at === undefined) return;
  if (typeof at !== 'number') throw new TypeError(`at must be a number of milliseconds; got ${kindOf(at)}`);
  if (!Number.isFinite(at)) throw new RangeError(`at must be a finite number of milliseconds; got ${at}`);
}

/**
 * An in-process cache on lru-cache. Values are stored as they are (no serialisation, so a hit is
 * a map lookup); each entry's physical TTL is `ttl + staleWhileRevalidate` (with fail-safe
 * `ttl + max(staleWhileRevalidate, maxStale)`).
 *
 * @example
 * const cache = createMemoryCache({ max: 50_000 });
 * const count = await getOrCompute(cache, 'bookmark_count', '30s', countBookmarks);
 */
export function createMemoryCache(options: MemoryCacheOptions = {}): MemoryCache {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  checkKnownKeys(options, MEMORY_OPTIONS, 'options');
  const { max = 10_000, name = 'memory', lru: given } = options;
  if (typeof name !== 'string' || name.length === 0)
    throw new TypeError('options.name must be a non-empty string');
  if (given !== undefined && !(given instanceof LRUCache)) {
    throw new TypeError('options.lru must be an LRUCache from lru-cache');
  }
  // lru-cache refuses every `set` without a size once it limits sizes: such a cache would never
  // hold anything (each write a backend-error event, each call a fill).
  if (
    given !== undefined &&
    (given.maxSize > 0 || given.maxEntrySize > 0) &&
    given.sizeCalculation === undefined
  ) {
    throw new TypeError(
      'options.lru limits sizes (maxSize or maxEntrySize) but has no sizeCalculation: lru-cache would refuse every write stampede makes; give it a sizeCalculation (it receives the stored CacheEntry)',
    );
  }
  if (typeof max !== 'number') throw new TypeError(`options.max must be a number; got ${kindOf(max)}`);
  if (given === undefined && (!Number.isInteger(max) || max < 1 || max > MAX_ENTRIES)) {
    throw new RangeError(
      `options.max must be a positive integer up to ${MAX_ENTRIES} (lru-cache allocates every slot up front, about 44 bytes each); got ${String(max)}. For more entries, pass an LRUCache of your own as options.lru`,
    );
  }
  // The change count (see `CHANGES` in @stampede/core/adapter), raised by every call that may change
  // what a later `get` answers or which entry the lru drops first: every method, a `get` too, since
  // it moves its entry up the lru's order. While it holds, the core may answer a burst of stale reads
  // during a refresh from the burst's first read: nothing touched the cache since, so a read would
  // find, and leave, everything as it is. Kept here, not on the object: a frozen cache still counts,
  // and a copy (which would hold a number that never moves) gets no count. One count per lru: caches
  // made on one given lru count each other's calls.
  const changes = (given === undefined ? undefined : lruCounts.get(given)) ?? { n: 0 };
  if (given !== undefined) lruCounts.set(given, changes);
  const lru =
    given ?? new LRUCache<string, CacheEntry>({ max, perf: wallClock, ttlResolution: TTL_RESOLUTION_MS });
  // The cache's own reads call lru-cache's `get` itself: the hit path pays no wrapper.
  const lruGet = lru.get;
  // On the lru made here, every public method a caller may use directly counts too (a read moves the
  // order, a new key may evict, a new TTL may drop an entry; every removal happens inside one of
  // them). The cache's own writes count twice, which only moves the number further. An lru given
  // keeps its own methods: only what goes through this cache is counted then (see the README).
  if (given === undefined) countDirectCalls(lru, changes);

  // When each key was last deleted, so a fill that started before the delete (and writes after it)
  // cannot bring the old value back. Bounded like the cache; a record pushed out raises its floor,
  // which then refuses every write whose fill started before that deletion: a refused write costs
  // at most one more fill later, a forgotten delete would serve an invalidated value.
  // Only `set` reads these, so the hit path pays nothing for them.
  const records = lru.max > 0 ? lru.max : max;
  const deletions = createLatestTimes(records);
  // Date.now() cannot order a fill and a delete of the same millisecond. The tie goes to the write:
  // `delete` then `set` (or `invalidate` then `setValue`) within one millisecond must store. A fill
  // that started less than 1 ms before a delete may thus still write; core's `invalidate` closes
  // even that gap for this process's fills, as it stops them from writing at all.
  // When each tag was last invalidated, bounded like the deletions: a record pushed out raises the
  // floor, which then invalidates every tagged entry created before it (a few more misses, never an
  // invalidated value served).
  const tagTimes = createLatestTimes(records);
  // When a direct write carrying each tag was last dated past the clock (see `set`), bounded the
  // same way: a record pushed out raises the floor, which every later invalidation then covers.
  const stamps = createLatestTimes(records);
  // Which invalidations this cache's own caller made (`invalidateTags` without `at`: the core's
  // `invalidateTag`), by the clock's time when made; and the records of those heard from elsewhere
  // (with `at`: a tiered cache's other replicas). Bounded the same way: a forgotten own time (too
  // late) or heard record (too late) only keeps a fill of that millisecond from being kept (see
  // `set`), never keeps one it should not.
  const ownTimes = createLatestTimes(records);
  const heardTimes = createLatestTimes(records);
  // `entry` dated `createdAt`; dated past the clock, it is covered by the next invalidation of any
  // of its tags (see `invalidateTags`).
  const datedAt = (entry: CacheEntry, createdAt: number, now: number): CacheEntry => {
    if (createdAt > now) for (const tag of entry.tags ?? []) stamps.record(tag, createdAt);
    return changeEntry(entry, { createdAt });
  };
  // An entry created in the very millisecond of an invalidation counts as before it.
  const taggedOut = (entry: CacheEntry): boolean =>
    entry.tags !== undefined && entry.createdAt <= tagTimes.latest(entry.tags);
  let warnedTooLarge = false;
  const deletedAfter = (key: string, createdAt: number): boolean => {
    if (createdAt < deletions.floor) return true;
    const deletedAt = deletions.peek(key);
    return deletedAt !== undefined && createdAt < deletedAt;
  };

  const refusedForSize = (key: string): false => {
    if (!warnedTooLarge) {
      warnedTooLarge = true;
      reportWarning(
        name,
        `stampede: memory cache '${name}' could not keep the entry of '${key}': its lru refuses entries over maxEntrySize (${lru.maxEntrySize}) or maxSize (${lru.maxSize}) by its sizeCalculation. Such a key is filled on every call; raise the limit or keep smaller values (said once per cache)`,
      );
    }
    return false;
  };

  // `size` and the change count are added by defineLiveFields: see there.
  const cache = {
    name,
    lru,
    get(key: string): CacheEntry | undefined {
      // Also on the hit path: lru-cache would answer a number key as a miss, and an empty one too.
      checkCacheKey(key);
      changes.n++;
      const entry = lruGet.call(lru, key, NO_GET_OPTIONS);
      // Untagged entries (the common case) pay one property read.
      if (entry === undefined || entry.tags === undefined || !taggedOut(entry)) return entry;
      lru.delete(key);
      return undefined;
    },
    set(key: string, given: CacheEntry, options: CacheSetOptions): boolean {
      // Before anything is read or written: a malformed entry would be stored and served.
      checkCacheKey(key);
      checkCacheWrite(given, options);
      const { ttl, direct, renews, afterInvalidations } = options;
      changes.n++;
      let entry = given;
      // A direct write (setValue) comes after every delete its caller knows of: only fills are
      // refused by a delete newer than their start.
      if (direct !== true && deletedAfter(key, entry.createdAt)) return false;
      // Likewise after every tag invalidation its caller knows of: one made in the same millisecond
      // (`invalidateTag`, then `setValue` to repopulate) must not make it read as invalidated, as
      // it would a fill of that millisecond; nor one recorded past the present (see
      // `invalidateTags`). It is dated just after the latest. An older direct write (a tiered
      // cache's copy of an entry read before the invalidation) still reads as invalidated.
      const stored = lru.peek(key);
      const tags = entry.tags;
      if (tags !== undefined && afterInvalidations === true && direct !== true && renews === undefined) {
        // A fill the core says started after every invalidation of its tags this process made
        // (`afterInvalidations`), in their millisecond (or later, where records stand past the
        // clock): like a direct write, it is dated just past the record, or a refill right after
        // `invalidateTag` would read as invalidated and the next call would fill again. Only past
        // records of this process's own invalidations (no `at`): one heard from elsewhere (`at`)
        // may have come after the fill's start, and there the tie still reads as invalidated.
        const latest = tagTimes.latest(tags);
        const createdAt = entry.createdAt;
        if (
          createdAt <= latest &&
          tagTimes.floor < createdAt &&
          heardTimes.latest(tags) < createdAt &&
          ownTimes.latest(tags) <= createdAt
        ) {
          entry = datedAt(entry, latest + 1, Date.now());
        }
      }
      if (direct === true) {
        const now = Date.now();
        let createdAt = entry.createdAt;
        if (tags !== undefined) {
          const latest = tagTimes.latest(tags);
          if (createdAt <= latest && (createdAt === latest || latest >= now)) createdAt = latest + 1;
        }
        // A write of this millisecond after a value this cache dated past the clock (above): it is
        // the later one, so it takes that date (a tie replaces). An older one (a tiered cache's copy
        // of an earlier read) keeps its own and loses.
        if (
          stored !== undefined &&
          stored.createdAt > now &&
          createdAt >= now &&
          stored.createdAt > createdAt
        ) {
          createdAt = stored.createdAt;
        }
        if (createdAt !== entry.createdAt) entry = datedAt(entry, createdAt, now);
      }
      if (!shouldReplace(stored, entry)) return false;
      // An expired entry still replaces an older one: it is what the writer (say `setValue` with
      // ttl 0) wants the next read to see, and that is a miss.
      // So does an entry a tag invalidated already (a fill that started before the invalidation).
      if ((ttl !== undefined && !(ttl > 0)) || !(entry.staleUntil > Date.now()) || taggedOut(entry)) {
        lru.delete(key);
        return true;
      }
      lru.set(key, entry, { ttl });
      // An lru that limits sizes drops an entry larger than it allows (and the previous one):
      // refused, and said once, or every call for the key would fill again with no sign why.
      if (lru.maxEntrySize > 0 || lru.maxSize > 0) {
        if (lru.peek(key) !== entry) return refusedForSize(key);
      }
      return true;
    },
    delete(key: string): void {
      checkCacheKey(key);
      changes.n++;
      lru.delete(key);
      deletions.record(key, Date.now());
    },
    invalidateTags(tags: readonly string[], heardAt?: number): void {
      // A string would be read as the list of its characters.
      checkTagList(tags);
      checkHeardAt(heardAt);
      const at = heardAt ?? Date.now();
      changes.n++;
      const origin = heardAt === undefined ? ownTimes : heardTimes;
      // A direct write dated just past a record of one of its tags (see `set`) is covered by the
      // next invalidation of any of them, recorded at that date if it is later: `invalidateTag`,
      // `setValue`, `invalidateTag` in one millisecond leaves the value invalidated. Nothing else
      // moves a record past `at` (a burst of invalidations does not push it into the future).
      for (const tag of tags) {
        const record = Math.max(stamps.peek(tag) ?? Number.NEGATIVE_INFINITY, stamps.floor, at);
        tagTimes.record(tag, record);
        origin.record(tag, heardAt === undefined ? at : record);
      }
    },
    clear(): void {
      changes.n++;
      lru.clear();
      deletions.clear();
      deletions.raise(Date.now());
    },
  } satisfies Omit<MemoryCache, 'size'>;
  // No count where a skipped read would differ from one: an lru that restarts an entry's TTL on
  // every read (`updateAgeOnGet`), or an object that inherits this cache but answers `get` its own
  // way (`Object.create(cache)` with a `get` of its own: the getter sees it as `this`).
  return defineLiveFields(cache, { lru, changes, get: cache.get, counted: lru.updateAgeOnGet !== true });
}

// The live fields, `size` and the change count, are accessors every cache shares, reading the
// cache's own state from a slot of its own. V8 keeps an object in dictionary mode (its properties
// in a hash table, so that every call of the cache's `get` starts with a lookup) when it is made by
// a literal holding an accessor, and when an accessor is added that differs from the one added to
// an earlier object of the same shape (a closure made per cache): only the first cache made would
// be spared. Measured on a stale read answered during a refresh: 64-98 ns a call, 31 ns since.
const OWN = Symbol('@stampede/memory/own');

/** A cache's own state, read by the shared accessors. */
interface Own {
  readonly lru: LRUCache<string, CacheEntry>;
  readonly changes: { n: number };
  /** The cache's own `get`: an object inheriting the cache with a `get` of its own gets no count. */
  readonly get: MemoryCache['get'];
  readonly counted: boolean;
}

type WithOwn = { readonly [OWN]?: Own } & Pick<MemoryCache, 'get'>;

function sizeOf(this: WithOwn): number {
  return this[OWN]?.lru.size ?? 0;
}

function changesOf(this: WithOwn): number | undefined {
  const own = this[OWN];
  return own !== undefined && own.counted && this.get === own.get ? own.changes.n : undefined;
}

function defineLiveFields(cache: Omit<MemoryCache, 'size'>, own: Own): MemoryCache {
  Object.defineProperty(cache, OWN, { value: own });
  Object.defineProperty(cache, 'size', { get: sizeOf, enumerable: true, configurable: true });
  Object.defineProperty(cache, CHANGES, { get: changesOf });
  return cache as MemoryCache;
}

/** Wraps `lru`'s public methods that read or change entries so that each call raises `count`. */
function countDirectCalls(lru: LRUCache<string, CacheEntry>, count: { n: number }): void {
  const methods = lru as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of COUNTED_METHODS) {
    const method = methods[name];
    if (typeof method !== 'function') continue;
    Object.defineProperty(lru, name, {
      value(this: unknown, ...args: unknown[]): unknown {
        count.n++;
        return method.apply(this, args);
      },
      writable: true,
      configurable: true,
      enumerable: false,
    });
  }
}

// lru-cache's methods that move an entry, add, change or drop one (peek, the iterators and `info`
// change nothing).
const COUNTED_METHODS = [
  'get',
  'set',
  'delete',
  'clear',
  'has',
  'pop',
  'purgeStale',
  'load',
  'fetch',
  'forceFetch',
  'memo',
];

// The change count of each given lru, shared by every cache made on it (see `changes`).
const lruCounts = new WeakMap<LRUCache<string, CacheEntry>, { n: number }>();
