import type { CoarseClock } from './clock.js';
import type { StampedeListener } from './events.js';
import type { Flight } from './flight.js';
import type { CacheState } from './registry.js';
import type { StampedeStats } from './stats.js';

/** What a fill's async context carries: the fill it belongs to and the fill that started it. */
export interface FillFrame {
  /** The flight whose fill function is running in this context. */
  readonly flight: Flight;
  /** The frame of the fill that started this one in the foreground, if any. */
  readonly parent: FillFrame | undefined;
  /** Set once the fill function has settled: from then on nothing can be waiting on it. */
  done: boolean;
}

/** The part of `AsyncLocalStorage` the core uses (Node, Bun, Deno and workerd's `node:async_hooks`). */
export interface AsyncContextStorage {
  run<R>(store: FillFrame, callback: () => R): R;
  getStore(): FillFrame | undefined;
  /** Stops tracking while no fill runs (Node pays a cost on every promise while tracking). */
  disable?(): void;
}

/** The async context in which fills run, when the runtime offers one. */
export interface FillTracking {
  readonly storage: AsyncContextStorage;
  /** Fill functions that have not settled yet; the storage is disabled when this drops to 0. */
  running: number;
}

/**
 * Everything the core keeps process-wide. It lives on `globalThis` under a `Symbol.for` key, not in
 * module variables, because one process can load the core more than once: through `import` and
 * `require` (an ESM app with a CommonJS dependency that also uses stampede), or as two installed
 * copies of the same major version. Each copy then has its own modules, but they must share one
 * single-flight registry, one set of counters, one list of listeners and one refresh cap, or one key
 * gets two fills and the stats tell half the story.
 *
 * The version in the key is the layout of this object, of the per-cache state and of flights. A
 * change that an older copy could not read bumps it (copies with different layouts then keep apart);
 * adding a field does not, and every copy creates a field it needs but does not find.
 */
export interface Shared {
  readonly version: 1;
  /** Counters by cache name (`stats.ts`). */
  readonly counters: Map<string, StampedeStats>;
  /** Event listeners (`events.ts`); a copy-on-emit array. */
  readonly listeners: StampedeListener[];
  /** The process-wide cap on background refreshes and how many run now (`background.ts`). */
  readonly refresh: { max: number; active: number };
  /** Per-cache state of caches that are frozen (others carry it themselves, `registry.ts`). */
  readonly frozenStates: WeakMap<object, CacheState>;
  /** The fill context, set by the entry point of runtimes that have `AsyncLocalStorage`. */
  fills: FillTracking | undefined;
  /**
   * Whether fills run in that context (`configure({ detectSelfCalls })`). Optional: a shared object
   * made by an older copy lacks it, which means true.
   */
  detectSelfCalls?: boolean;
  /**
   * Whether concurrent callers may run in request contexts that must not settle each other's
   * promises (`configure({ isolatedRequests })`; workerd's rule). Optional: a shared object made by
   * an older copy lacks it, which means the runtime's default ({@link runsIsolatedRequests}).
   */
  isolatedRequests?: boolean;
  /**
   * The random source of `earlyRefresh` (`configure({ random })`). Optional: a shared object made
   * by an older copy lacks it, which means `Math.random`.
   */
  random?: () => number;
  /**
   * The coarse clock the hit path reads (`clock.ts`). Optional: a shared object made by an older
   * copy lacks it, and the first copy that needs it creates it.
   */
  clock?: CoarseClock;
  /**
   * The warnings written to the console so far (`stats.ts` `printWarning`). Optional: a shared
   * object made by an older copy lacks it, and the first copy that needs it creates it.
   */
  printedWarnings?: Set<string>;
  /**
   * Each local cache in use as a tiered cache's L1, with that tiered cache's claim on it
   * (`tiered.ts`): one L1 behind two tiered caches would answer one's keys with the other's values.
   * Optional: a shared object made by an older copy lacks it, and the first copy that needs it
   * creates it.
   */
  localTiers?: WeakMap<object, { readonly name: string }>;
  /**
   * This process's tag invalidations in call order (`tags.ts`): `seq` counts them, `byTag` holds the
   * number of each tag's latest (the last {@link INVALIDATIONS_KEPT} tags; one pushed out raises
   * `floor` to its number). A flight notes `seq` when it starts: a fill whose tags were all last
   * invalidated at or before that number started after those calls (`Flight.invalidationsBefore`).
   * Optional: a shared object made by an older copy lacks it, and the first copy that needs it
   * creates it.
   */
  invalidations?: { seq: number; floor: number; readonly byTag: Map<string, number> };
}

/** How many tags' latest invalidation numbers {@link Shared.invalidations} keeps. */
export const INVALIDATIONS_KEPT = 10_000;

/** This process's tag invalidations so far (see {@link Shared.invalidations}). */
export function invalidations(): NonNullable<Shared['invalidations']> {
  shared.invalidations ??= { seq: 0, floor: 0, byTag: new Map() };
  return shared.invalidations;
}

const SHARED_KEY = Symbol.for('@stampede/core/shared/v1');

/** The symbol under which each cache object carries its state, shared by every copy of the core. */
export const STATE_KEY: unique symbol = Symbol.for('@stampede/core/state/v1');

/**
 * A tiered cache's L1 (`local`), under a `Symbol.for` key so that any copy of the core finds it: the
 * hit path reads a fresh L1 copy straight from it (see `CacheState.localTier`).
 */
export const LOCAL_TIER_KEY: unique symbol = Symbol.for('@stampede/core/local-tier/v1');

/**
 * A tiered cache's record of which tier answered its latest asynchronous read of each entry it
 * handed out (`tiered.ts`), under a `Symbol.for` key like {@link LOCAL_TIER_KEY}: callers that share
 * that read count the same `l1Hits`/`l2Hits` as the caller whose read it was.
 */
export const TIER_ANSWERS_KEY: unique symbol = Symbol.for('@stampede/core/tier-answers/v1');

/**
 * Under this key an in-process adapter may keep a count of its changes: a number it raises on every
 * read, write, delete, clear or tag invalidation (a read moves its entry up an lru's order), so that
 * the core may answer a burst of stale reads during a refresh from the first read's entry while the
 * count holds: nothing touched the cache since (see `get-or-compute.ts`, staleAgain). Exported to
 * adapters as `CHANGES`; best a non-enumerable getter (a frozen cache still counts, a copy has none).
 */
export const CHANGES_KEY: unique symbol = Symbol.for('@stampede/core/changes/v1');

/** Values of the {@link TIER_ANSWERS_KEY} map: neither tier's hit (a fallback copy), L1, L2. */
export const ANSWERED_BY_NEITHER = 0;
export const ANSWERED_BY_L1 = 1;
export const ANSWERED_BY_L2 = 2;

/** The {@link TIER_ANSWERS_KEY} map: by entry, the tier that answered the latest read of it. */
export type TierAnswers = WeakMap<object, number>;

function create(): Shared {
  return {
    version: 1,
    counters: new Map(),
    listeners: [],
    refresh: { max: 64, active: 0 },
    frozenStates: new WeakMap(),
    fills: undefined,
  };
}

function load(): Shared {
  const holder = globalThis as { [SHARED_KEY]?: Shared };
  const found = holder[SHARED_KEY];
  if (found !== undefined) return found;
  const shared = create();
  // Not writable or enumerable: nothing should replace it, and it should not show up in the global
  // object's listings.
  Object.defineProperty(holder, SHARED_KEY, { value: shared, enumerable: false, writable: false });
  return shared;
}

/**
 * True on runtimes where a promise made while serving one request must not be settled from another
 * request's work: Cloudflare's workerd (its `navigator.userAgent` is `'Cloudflare-Workers'`). There a
 * request that awaits another request's fill is cancelled as hung, and the fill's resolution is
 * refused with a warning, so callers that join a fill watch it from their own context instead.
 */
export function runsIsolatedRequests(): boolean {
  const navigator = (globalThis as { navigator?: { userAgent?: unknown } }).navigator;
  return navigator?.userAgent === 'Cloudflare-Workers';
}

const ISOLATED_BY_DEFAULT = runsIsolatedRequests();

/** Whether callers in this process observe fills from their own request context (see `Shared`). */
export function isolatedRequests(): boolean {
  return shared.isolatedRequests ?? ISOLATED_BY_DEFAULT;
}

/** The process-wide state, created by the first copy of the core that loads. */
export const shared: Shared = load();
