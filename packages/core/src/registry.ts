import type { Cache, CacheEntry } from './cache.js';
import { kindOf } from './errors.js';
import type { Flight } from './flight.js';
import { LOCAL_TIER_KEY, STATE_KEY as STATE, shared, TIER_ANSWERS_KEY, type TierAnswers } from './shared.js';
import { countersFor, type StampedeStats } from './stats.js';

export { STATE };

/** What the core keeps per cache instance: coalescing is per (cache instance, key). */
export interface CacheState {
  readonly cache: Cache;
  readonly name: string;
  readonly counters: StampedeStats;
  /** The fills in flight in this process, by key. */
  readonly flights: Map<string, Flight>;
  /** Asynchronous reads in flight, by key: concurrent callers share one backend read. */
  readonly reads: Map<string, Promise<CacheEntry | undefined>>;
  warnedNoLock: boolean;
  /**
   * For a tiered cache, its L1: `getOrCompute`'s hit path answers a fresh L1 copy from it directly
   * (one clock reading, no call through the tiered cache's own `get`). Absent otherwise, and on a
   * state another copy of the core made before it knew of this, and once the tiered cache is closed
   * (its `close()` unsets it).
   */
  localTier?: Cache | undefined;
  /**
   * For a tiered cache, which tier answered its latest read of each entry (see `TIER_ANSWERS_KEY`):
   * callers sharing a read count the hit it was. Absent otherwise.
   */
  tierAnswers?: TierAnswers | undefined;
  /**
   * When keys were last invalidated or set directly, kept a minute (`fail-safe.ts`): an older entry
   * never becomes a fail-safe fallback. Created on first use (a state made by another copy of the
   * core may lack it).
   */
  invalidatedAt?: Map<string, number>;
  /**
   * For each key in {@link invalidatedAt}, when that latest invalidation's backend call settled (it
   * is absent while the call runs): a read started since then sees the cache after it, so what it
   * returns may serve as a fallback whatever its `createdAt` says (`fail-safe.ts`). Created on first
   * use, like `invalidatedAt`.
   */
  invalidationSettledAt?: Map<string, number>;
  /**
   * Keys whose latest read a caller's `checkValue` refused (an entry was found and failed the
   * check): the fill that caller starts is marked `Flight.afterRefusal`. Created on first use.
   */
  refusedReads?: Set<string>;
  /**
   * The work this process has running on the cache (each fill's whole run: lock phase, fill, write,
   * lock release, fail-safe re-arm), for `whenIdle`. Created on first use (a state made by another
   * copy of the core may lack it).
   */
  running?: Set<Promise<unknown>>;
  /** A caller's `waitUntil` threw and this was warned of (once per cache). */
  warnedWaitUntil?: boolean;
}

// The state hangs off the cache object under a symbol (one property load on the hit path); a frozen
// cache object falls back to a WeakMap. Both are shared by every copy of the core loaded in this
// process (see shared.ts), so a cache used through the ESM and the CommonJS build has one registry.
const frozenStates = shared.frozenStates;

export type Stateful = Cache & { [STATE]?: CacheState };

const describeName = (name: unknown): string => (name === '' ? "''" : kindOf(name));

function assertCache(cache: unknown): asserts cache is Cache {
  if (typeof cache !== 'object' || cache === null) {
    throw new TypeError(`cache must be a Cache object; got ${kindOf(cache)}`);
  }
  const candidate = cache as Partial<Cache>;
  for (const method of ['get', 'set', 'delete'] as const) {
    if (typeof candidate[method] !== 'function') {
      throw new TypeError(`cache must implement the Cache interface: cache.${method} is not a function`);
    }
  }
  if (candidate.name !== undefined && (typeof candidate.name !== 'string' || candidate.name.length === 0)) {
    throw new TypeError(
      `cache.name must be a non-empty string when present; got ${describeName(candidate.name)}`,
    );
  }
}

/** The state of `cache`, created (after checking that it is a Cache) on first use. */
export function stateOf(cache: Cache): CacheState {
  const state = cache == null ? undefined : (cache as Stateful)[STATE];
  if (state !== undefined) return state;
  return createState(cache);
}

function createState(cache: Cache): CacheState {
  assertCache(cache);
  const known = frozenStates.get(cache);
  if (known !== undefined) return known;
  const name = cache.name ?? 'default';
  const state: CacheState = {
    cache,
    name,
    counters: countersFor(name),
    flights: new Map(),
    reads: new Map(),
    warnedNoLock: false,
    localTier: (cache as Cache & { [LOCAL_TIER_KEY]?: Cache })[LOCAL_TIER_KEY],
    tierAnswers: (cache as Cache & { [TIER_ANSWERS_KEY]?: TierAnswers })[TIER_ANSWERS_KEY],
  };
  if (Object.isExtensible(cache)) {
    Object.defineProperty(cache, STATE, {
      value: state,
      enumerable: false,
      configurable: false,
      writable: false,
    });
  } else {
    frozenStates.set(cache, state);
  }
  return state;
}

/**
 * How many fills are in flight for `cache` in this process (0 once every caller has settled). A
 * diagnostic, exported by the main entry for tests and health checks ("no fill is left running after
 * shutdown"); the core's behaviour never depends on anyone reading it. An object never used as a
 * cache has 0.
 *
 * @throws TypeError when `cache` is not an object
 * @example
 * await Promise.all(requests);
 * expect(inFlightCount(cache)).toBe(0);
 */
export function inFlightCount(cache: Cache): number {
  // A health check on a variable that holds no cache must not read as "nothing in flight".
  if (typeof cache !== 'object' || cache === null) {
    throw new TypeError(`cache must be a Cache; got ${kindOf(cache)}`);
  }
  return existingState(cache)?.flights.size ?? 0;
}

/** The state of `cache` if it has been used as a cache (never creates one). */
export function existingState(cache: Cache): CacheState | undefined {
  return (cache as Stateful)[STATE] ?? frozenStates.get(cache);
}
