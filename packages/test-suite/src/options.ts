import type { Cache } from '@stampede/core';
import { checkKnownKeys } from '@stampede/core/adapter';

/**
 * What an adapter supports beyond the required `get`, `set` and `delete`. Declared, not inferred:
 * the suite checks the declaration against the cache object, so a method that went missing fails
 * the run instead of quietly skipping its cases. Cases for a capability declared `false` are
 * reported as skipped.
 */
export interface CacheCapabilities {
  /** The cache implements `tryAcquireFillLock` (a distributed fill lock). */
  lock: boolean;
  /** Its lock handles implement `extend` (needs `lock`). */
  extend: boolean;
  /** The cache implements `onFillDone` (push wake-up when a fill under the lock ends; needs `lock`). */
  push: boolean;
  /**
   * `get`, `set` and `delete` answer synchronously (plain values, never promises), as an in-process
   * cache should so that hits never touch a promise chain.
   */
  sync: boolean;
  /** The cache implements `roundTrip` (it stores text and hands values back through a serializer). */
  roundTrip: boolean;
  /**
   * The cache implements `invalidateTags`: entries carry `tags`, and an invalidated tag turns every
   * entry that carried it and was created before the invalidation into a miss.
   * @default false
   */
  tags?: boolean | undefined;
  /**
   * The cache has an invalidation `bus` (what `createTieredCache` uses to keep replicas' local
   * copies coherent): a message published on one instance reaches every subscriber on the same
   * namespace, the publisher's own included.
   * @default false
   */
  bus?: boolean;
  /**
   * The cache implements `tryAcquireFillLockAndRead`: a lock attempt that reads the key in the same
   * step (needs `lock`).
   * @default false
   */
  lockAndRead?: boolean | undefined;
  /**
   * Its lock handles implement `commit`: the write, the release as `'filled'` and its announcement
   * in one step (needs `lock`).
   * @default false
   */
  commit?: boolean | undefined;
  /**
   * The cache keeps an entry's `delta` (how long the fill that produced it ran), which
   * `earlyRefresh` and lock waiters time by. Declare `false` for a cache that cannot store it: the
   * core then only loses those optimisations for its entries.
   * @default true
   */
  delta?: boolean;
  /**
   * The cache stores times on its backend's clock and hands them back on this process's clock
   * through its own estimate of the offset (as the Redis-protocol adapters do). When the estimate
   * moves (a tighter measurement proves it wrong), every time read afterwards moves with it: an
   * entry read back on the same instance may then have all of its times shifted together, by up to
   * 50 ms. The durations between them, the value, `delta` and `tags` must still come back exactly.
   * @default false
   */
  serverClock?: boolean;
  /**
   * The cache's own methods, called directly, refuse a bad argument before they read or write
   * anything (a number or empty key, a malformed entry, bad set options, a string of tags, a lock TTL
   * that is not a number of at least 1 ms, a listener or bus handler that is not a function, a bus
   * message that is not a string): with a `TypeError` or `RangeError` whose message names the
   * argument, thrown where the method answers synchronously (every method of a `sync` cache;
   * `onFillDone`, `hearsFillDone` and `bus.subscribe` of any cache), otherwise a rejected promise.
   * The checks of `@stampede/core/adapter` (`checkCacheKey`, `checkCacheWrite`, `checkTagList`,
   * `checkLockTtl`, `checkFillDoneArguments`, `checkBusMessage`, `checkBusHandlers`) do all of it.
   * @default false
   */
  checksArguments?: boolean;
  /**
   * The cache keeps a change count under `CHANGES` (from `@stampede/core/adapter`): a number it
   * raises on every `get`, `set`, `delete`, `clear` and `invalidateTags` (and on any other change to
   * what `get` answers, or to which entry it would evict first, but the passing of time), so that
   * the core may answer a burst of stale reads during a refresh from the burst's first read while the
   * count holds. Only for a cache whose entries change through this object alone (in-process
   * memory), never for a shared backend. Keep it off the object's own enumerable properties (a
   * getter defined with `Object.defineProperty`): a copy of the object must not carry a number that
   * never moves.
   * @default false
   */
  changes?: boolean;
}

/** How to run the conformance suite against one adapter. */
export interface ConformanceOptions {
  /** Shown in the test names. */
  name: string;
  /** What the adapter supports: see {@link CacheCapabilities}. */
  capabilities: CacheCapabilities;
  /**
   * A new, empty cache: its own instance and (for a remote adapter) its own namespace, such as a key
   * prefix no other cache of the run uses. Two caches it returns must never see each other's keys.
   */
  create(): Cache | Promise<Cache>;
  /**
   * A second instance on the same backend and namespace as `of` (what another replica of the same
   * service would hold). With it, the lock, delete-during-fill and `onFillDone` cases run across two
   * instances; without it they run on one. Omit it for a cache that lives in one process's memory.
   * @default undefined
   */
  replica?(of: Cache): Cache | Promise<Cache>;
  /**
   * A change made through a replica reaches this instance's reads a moment later, not at once: a
   * tiered cache's local copy is evicted by a bus message. Cases that read on one instance what
   * another just changed then retry the read for up to 2 s instead of reading once.
   * @default false
   */
  replicaLag?: boolean;
  /**
   * `'fake'`: the adapter's expiry follows `Date.now()` and timers, so the suite uses vitest's fake
   * timers. `'real'`: the backend expires on its own clock (Redis), so the suite waits for real
   * (a few hundred milliseconds at a time).
   */
  clock: 'fake' | 'real';
  /**
   * Runs after the whole suite (close clients, remove the run's keys).
   * @default undefined
   */
  teardown?(): Promise<void> | void;
}

const REQUIRED_CAPABILITIES = ['lock', 'extend', 'push', 'sync', 'roundTrip'] as const;
const OPTIONAL_CAPABILITIES = [
  'tags',
  'bus',
  'lockAndRead',
  'commit',
  'delta',
  'serverClock',
  'checksArguments',
  'changes',
] as const;

const SUITE_OPTIONS: ReadonlySet<string> = new Set([
  'name',
  'capabilities',
  'create',
  'replica',
  'replicaLag',
  'clock',
  'teardown',
]);

const describe = (value: unknown): string => (value === null ? 'null' : typeof value);

/**
 * Checks `options` when the suite is registered, naming the option at fault: a mistake in the
 * declaration fails the file at once, not as a case that errs for another reason.
 *
 * @throws TypeError for a missing or mistyped option or capability
 */
export function checkOptions(options: ConformanceOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  // A misspelt hook or flag (`replicalag`, `teardwon`) would otherwise be ignored.
  checkKnownKeys(options, SUITE_OPTIONS, 'options');
  if (typeof options.name !== 'string' || options.name.length === 0) {
    throw new TypeError('options.name must be a non-empty string');
  }
  if (options.clock !== 'fake' && options.clock !== 'real') {
    throw new TypeError(`options.clock must be 'fake' or 'real'; got ${String(options.clock)}`);
  }
  if (typeof options.create !== 'function') {
    throw new TypeError(`options.create must be a function; got ${describe(options.create)}`);
  }
  for (const hook of ['replica', 'teardown'] as const) {
    const value = options[hook];
    if (value !== undefined && typeof value !== 'function') {
      throw new TypeError(`options.${hook} must be a function; got ${describe(value)}`);
    }
  }
  if (options.replicaLag !== undefined && typeof options.replicaLag !== 'boolean') {
    throw new TypeError(`options.replicaLag must be a boolean; got ${describe(options.replicaLag)}`);
  }
  const capabilities: unknown = options.capabilities;
  if (typeof capabilities !== 'object' || capabilities === null) {
    throw new TypeError(`options.capabilities must be an object; got ${describe(capabilities)}`);
  }
  const declared = capabilities as Record<string, unknown>;
  for (const name of REQUIRED_CAPABILITIES) {
    if (typeof declared[name] !== 'boolean') {
      throw new TypeError(`options.capabilities.${name} must be a boolean; got ${describe(declared[name])}`);
    }
  }
  for (const name of OPTIONAL_CAPABILITIES) {
    if (declared[name] !== undefined && typeof declared[name] !== 'boolean') {
      throw new TypeError(`options.capabilities.${name} must be a boolean; got ${describe(declared[name])}`);
    }
  }
  const known: readonly string[] = [...REQUIRED_CAPABILITIES, ...OPTIONAL_CAPABILITIES];
  for (const name of Object.keys(declared)) {
    // A misspelt capability would otherwise leave its cases skipped.
    if (!known.includes(name)) {
      throw new TypeError(`options.capabilities.${name} is not a capability (known: ${known.join(', ')})`);
    }
  }
}
