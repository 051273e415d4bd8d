import { type CheckValue, toValueCheck, type ValueCheck } from './check-value.js';
import { type Duration, toMilliseconds, toOptionalMilliseconds, toPositiveMilliseconds } from './duration.js';
import { checkKnownKeys, kindOf } from './errors.js';
import { toTags } from './tags.js';

/** Options of {@link getOrComputeWith}. Every field is optional. */
export interface GetOrComputeOptions {
  /**
   * How long a value is fresh. A `ttl` (plus grace) past 2^53 ms, some 285,000 years, is stored as
   * "never expires" (no backend could be told the number).
   * @default undefined (never expires)
   */
  ttl?: Duration | undefined;
  /**
   * Grace after `ttl` during which the last value is served at once while one background refresh
   * runs (per process; fleet-wide with `distributedFillLock`). Ignored without `ttl`.
   * @default undefined (no stale serving)
   */
  staleWhileRevalidate?: Duration | undefined;
  /**
   * At most one replica fills a key at a time, through the cache's `tryAcquireFillLock`. On a cache
   * without it, protection is in-process only and a one-time warning says so.
   * @default false
   */
  distributedFillLock?: boolean | undefined;
  /**
   * The fill lock's expiry: bounds the damage of a holder that crashes. While the fill runs the
   * holder extends the lock every `lockTtl / 3`, but at least once per 24.8 days (the timer limit),
   * so any length is honoured.
   * @default '10s'
   */
  lockTtl?: Duration | undefined;
  /**
   * How long a replica that lost the lock waits for the winner's value before filling locally. Any
   * length is honoured, also past the 24.8-day timer limit.
   * @default '5s'
   */
  lockWaitTimeout?: Duration | undefined;
  /**
   * First poll delay of a lock loser; doubles each attempt up to 1 s (a first delay above 1 s is
   * waited once, in full, then polls go on every second).
   * @default '50ms'
   */
  lockPollInterval?: Duration | undefined;
  /**
   * This caller stops waiting when it aborts (the promise rejects with the signal's reason, or an
   * `AbortError` `DOMException` for a signal that has none, as old polyfills make); the
   * shared fill goes on for the other callers, and is aborted only when every caller has left.
   * One signal may serve any number of concurrent calls (a request's signal passed to every lookup
   * it makes): they share one `abort` listener on it, removed when the last of them settles.
   * @default undefined
   */
  signal?: AbortSignal | undefined;
  /**
   * Hard limit for one fill (lock wait included): every caller of it then gets a `CacheFillError`
   * of kind `'timeout'`, the fill's signal aborts, and the key can be filled again. A caller that
   * joins a fill already in flight (started with a longer limit, or none) waits at most this long
   * from then on: it alone gets kind `'timeout'` and leaves, and the fill goes on for the others
   * (it is aborted only once every caller has left). Any length is honoured: `'30d'` means 30
   * days, also past the 24.8-day limit of a single timer.
   * @default undefined (no limit)
   */
  fillTimeout?: Duration | undefined;
  /**
   * Refreshes a value ahead of its expiry, so that a key read often enough never expires in front of
   * its readers (XFetch: Vattani, Chierichetti and Lowenstein, VLDB 2015). On each fresh hit, with
   * `delta` the duration of the fill that produced the value, a background refresh starts when
   * `now - delta * beta * Math.log(random()) >= freshUntil`: the closer the expiry and the slower
   * the fill, the likelier. `beta` above 1 refreshes earlier, below 1 later. The refresh is the same
   * background flight as a stale-while-revalidate one: one per key per process, within
   * `configure({ maxBackgroundRefreshes })`, and with `distributedFillLock` one per key fleet-wide
   * (a replica that finds the lock taken keeps serving its fresh value; see `earlyRefreshes` in
   * `stats()`). Nothing happens without `ttl`, or for an entry whose fill duration is unknown (one
   * written by `setValue` or by an older release). A draw below 2^-53 counts as 2^-53, so the
   * refresh never comes more than about `36.7 * delta * beta` ahead of expiry.
   * @default undefined (off); `true` means `{ beta: 1 }`
   * @example
   * getOrComputeWith(cache, 'top10', { ttl: '30s', earlyRefresh: true, distributedFillLock: true }, fill)
   */
  earlyRefresh?: boolean | EarlyRefreshOptions | undefined;
  /**
   * Hands the work left after the callers have their value (a fill's write, its lock release and
   * announcement, a background refresh) to the platform so it outlives the request
   * (`(promise) => ctx.waitUntil(promise)` on Cloudflare Workers, `waitUntil` from
   * `@vercel/functions`). One that throws keeps nothing alive: one `warning` per cache says so.
   * @default undefined
   */
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
  /**
   * Groups this key's value belongs to: `invalidateTag(cache, tag)` drops every value that carried
   * `tag` when it was written (on every replica) without knowing their keys. Non-empty strings;
   * duplicates are ignored. Needs a cache that can invalidate tags (memory, Redis, node-redis,
   * Upstash); on another cache the tags are stored but `invalidateTag` rejects.
   * @default undefined (no tags)
   */
  tags?: readonly string[] | undefined;
  /**
   * Checks a value before it is handed out: a Standard Schema (zod, valibot, arktype, ...) or a
   * function answering `true` (good), `false` or a message (bad). A cached value that fails is a
   * miss (counted as `checkValueFailures`, with a `check-value` event) and is filled again; a fill
   * result that fails rejects with a `CacheFillError` of kind `'fill'` whose `cause` is the issues,
   * and is not cached. With a schema, callers get its output (the value it parsed); the cache keeps
   * what the fill returned. Asynchronous schemas work too. A caller that joins a fill already in
   * flight for the key gets that fill's result through its own `checkValue` (or, without one, as the
   * cache holds it), as a hit of that value would give it; one its own check refuses rejects with a
   * `CacheFillError` of kind `'fill_failed'` (counted). Callers passing the same schema or function
   * share one check of the result. A result that the starting call's check refuses fails the fill
   * for every caller of it.
   * @default undefined (no check)
   */
  checkValue?: CheckValue | undefined;
  /**
   * Fail-safe: when a fill fails (throws, rejects, passes `fillTimeout`, or returns a value that
   * fails `checkValue`) while a previous value of
   * the key is at most `maxStale` past the end of its freshness, every caller of that fill (the one
   * that ran it and the ones that joined it) gets that previous value instead of a
   * `CacheFillError`, and the value is re-armed: written back fresh for `throttle`, locally and in a
   * remote cache, so neither this process nor the fleet retries the failing source before then.
   * Without such a value the callers get the error, as without fail-safe. `true` takes the
   * defaults; see {@link FailSafeOptions}.
   *
   * With it, entries are kept physically for `ttl + max(staleWhileRevalidate, maxStale)` (the
   * envelope's freshness and stale-while-revalidate times do not change: past them the value is a
   * miss, and only a failing fill falls back on it). An invalidated key never comes back through
   * fail-safe. The options of the call that starts a fill decide for every caller of that fill.
   * An entry already past its stale window when it is stored (a `ttl` of 0 without
   * `staleWhileRevalidate`, or a `ttl + staleWhileRevalidate` shorter than the time from the fill's end
   * to its write: 1 ms can pass on the way) is taken by every adapter for a removal: such a key keeps
   * no previous value. Give keys a `ttl` (or a grace) of some milliseconds at least.
   * @default undefined (off)
   */
  failSafe?: boolean | FailSafeOptions | undefined;
  /**
   * With fail-safe's previous value at hand, a fill still running after this long answers its
   * callers with that value; the fill goes on in the background (bounded by `fillTimeout`, and
   * counted against the process-wide background-refresh cap while it runs: when the cap is reached,
   * callers keep waiting for it) and writes its result when it lands. Without a previous value the
   * callers wait as usual. Needs `failSafe` (a `TypeError` without it).
   * @default undefined (callers wait for the fill)
   */
  softTimeout?: Duration | undefined;
}

/** The settings of {@link GetOrComputeOptions.failSafe}. */
export interface FailSafeOptions {
  /**
   * How long after the end of its freshness (its `ttl`) a previous value may still answer for a
   * failing fill. Re-arming does not extend it: a value re-armed again and again is given up
   * `ttl + maxStale` after the fill that produced it started.
   * @default '1d'
   */
  maxStale?: Duration | undefined;
  /**
   * How long a value that answered for a failing fill is fresh again (re-armed), so that the
   * failing source is tried at most once per `throttle` per key (per process; fleet-wide on a
   * remote cache). At least 1 ms.
   * @default '30s'
   */
  throttle?: Duration | undefined;
}

/** The `earlyRefresh` option in its object form. */
export interface EarlyRefreshOptions {
  /**
   * How eagerly to refresh: the refresh's head start scales with `delta * beta`. A finite number
   * above 0.
   * @default 1
   */
  beta?: number | undefined;
}

/**
 * What a fill function is given. `stale` is `unknown` by default: in a shared cache it may have been
 * written by another version of your code, so check it before trusting its shape.
 */
export interface FillContext<T = unknown> {
  /** The key being filled. */
  readonly key: string;
  /** Aborted when every caller of this fill has left, or when `fillTimeout` passes. */
  readonly signal: AbortSignal;
  /** The last known value (stale or expired but still readable), if any. */
  readonly stale: T | undefined;
  /** True when this fill is a background refresh (stale-while-revalidate, or `earlyRefresh`). */
  readonly background: boolean;
}

/** Options after validation, in milliseconds. */
export interface ResolvedOptions {
  readonly ttl: number | undefined;
  readonly grace: number;
  readonly lock: boolean;
  readonly lockTtl: number;
  readonly lockWaitTimeout: number;
  readonly lockPollInterval: number;
  readonly signal: AbortSignal | undefined;
  readonly fillTimeout: number | undefined;
  readonly waitUntil: ((promise: Promise<unknown>) => void) | undefined;
  readonly tags: readonly string[] | undefined;
  readonly check: ValueCheck | undefined;
  readonly failSafe: ResolvedFailSafe | undefined;
  readonly softTimeout: number | undefined;
  /** `earlyRefresh`'s beta; 0 when off (also when there is no `ttl`). */
  readonly earlyRefresh: number;
  /** The caller's options object these were resolved from (none for a plain `getOrCompute`). */
  readonly source?: GetOrComputeOptions | undefined;
}

/** {@link FailSafeOptions} after validation, in milliseconds. */
export interface ResolvedFailSafe {
  readonly maxStale: number;
  readonly throttle: number;
}

/** Default {@link FailSafeOptions.maxStale}, ms (1 day). */
export const DEFAULT_FAIL_SAFE_MAX_STALE = 86_400_000;
/** Default {@link FailSafeOptions.throttle}, ms. */
export const DEFAULT_FAIL_SAFE_THROTTLE = 30_000;

/** Default lock expiry, ms. */
export const DEFAULT_LOCK_TTL = 10_000;
/** Default lock wait, ms. */
export const DEFAULT_LOCK_WAIT_TIMEOUT = 5_000;
/** Default first poll delay, ms. */
export const DEFAULT_LOCK_POLL_INTERVAL = 50;
/** The poll delay's ceiling, ms. */
export const LOCK_POLL_CEILING = 1_000;

/**
 * The options of a plain `getOrCompute(cache, key, ttl, fill)` call: the same object for the same
 * ttl as the call before, so that a hit on the slower path (taken while any fill of the cache is in
 * flight) allocates nothing. Resolved options are never changed once made.
 */
export function ttlOnly(ttl: number | undefined): ResolvedOptions {
  const last = lastTtlOnly;
  if (last !== undefined && last.ttl === ttl) return last;
  lastTtlOnly = plainOptions(ttl);
  return lastTtlOnly;
}

let lastTtlOnly: ResolvedOptions | undefined;

function plainOptions(ttl: number | undefined): ResolvedOptions {
  return {
    ttl,
    grace: 0,
    lock: false,
    lockTtl: DEFAULT_LOCK_TTL,
    lockWaitTimeout: DEFAULT_LOCK_WAIT_TIMEOUT,
    lockPollInterval: DEFAULT_LOCK_POLL_INTERVAL,
    signal: undefined,
    fillTimeout: undefined,
    waitUntil: undefined,
    tags: undefined,
    check: undefined,
    failSafe: undefined,
    softTimeout: undefined,
    earlyRefresh: 0,
    source: undefined,
  };
}

const FAIL_SAFE_DEFAULTS: ResolvedFailSafe = {
  maxStale: DEFAULT_FAIL_SAFE_MAX_STALE,
  throttle: DEFAULT_FAIL_SAFE_THROTTLE,
};

/** The fields of {@link GetOrComputeOptions} (anything else is a `TypeError`: see `checkKnownKeys`). */
const OPTION_NAMES: ReadonlySet<string> = new Set([
  'ttl',
  'staleWhileRevalidate',
  'distributedFillLock',
  'lockTtl',
  'lockWaitTimeout',
  'lockPollInterval',
  'signal',
  'fillTimeout',
  'earlyRefresh',
  'waitUntil',
  'tags',
  'checkValue',
  'failSafe',
  'softTimeout',
]);
/**
 * {@link checkKnownKeys} for {@link GetOrComputeOptions}, which runs on every call whose options are
 * written inline (a new object each time): a `switch` on the name costs some 5 ns, a `Set` lookup
 * some 20. A name the switch does not list goes to `checkKnownKeys`, which knows every option.
 */
function checkOptionNames(options: object): void {
  for (const key in options) {
    switch (key) {
      case 'ttl':
      case 'staleWhileRevalidate':
      case 'distributedFillLock':
      case 'lockTtl':
      case 'lockWaitTimeout':
      case 'lockPollInterval':
      case 'signal':
      case 'fillTimeout':
      case 'earlyRefresh':
      case 'waitUntil':
      case 'tags':
      case 'checkValue':
      case 'failSafe':
      case 'softTimeout':
        continue;
    }
    checkKnownKeys(options, OPTION_NAMES, 'options');
    return;
  }
}
const FAIL_SAFE_NAMES: ReadonlySet<string> = new Set(['maxStale', 'throttle']);
const EARLY_REFRESH_NAMES: ReadonlySet<string> = new Set(['beta']);

function resolveFailSafe(option: GetOrComputeOptions['failSafe']): ResolvedFailSafe | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return FAIL_SAFE_DEFAULTS;
  if (typeof option !== 'object' || option === null) {
    throw new TypeError(`options.failSafe must be a boolean or an object; got ${kindOf(option)}`);
  }
  checkKnownKeys(option, FAIL_SAFE_NAMES, 'options.failSafe');
  const maxStale =
    option.maxStale === undefined
      ? DEFAULT_FAIL_SAFE_MAX_STALE
      : toMilliseconds(option.maxStale, 'options.failSafe.maxStale');
  const throttle =
    option.throttle === undefined
      ? DEFAULT_FAIL_SAFE_THROTTLE
      : toPositiveMilliseconds(option.throttle, 'options.failSafe.throttle');
  return { maxStale, throttle };
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as AbortSignal).aborted === 'boolean' &&
    typeof (value as AbortSignal).addEventListener === 'function' &&
    typeof (value as AbortSignal).removeEventListener === 'function'
  );
}

/** Validates `options`, naming the field at fault. */
export function resolveOptions(options: GetOrComputeOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`options must be an object; got ${kindOf(options)}`);
  }
  checkOptionNames(options);
  const ttl = toOptionalMilliseconds(options.ttl, 'options.ttl');
  const grace = toOptionalMilliseconds(options.staleWhileRevalidate, 'options.staleWhileRevalidate') ?? 0;
  const lock = options.distributedFillLock === undefined ? false : options.distributedFillLock;
  if (typeof lock !== 'boolean') {
    throw new TypeError(`options.distributedFillLock must be a boolean; got ${kindOf(lock)}`);
  }
  const lockTtl =
    options.lockTtl === undefined
      ? DEFAULT_LOCK_TTL
      : toPositiveMilliseconds(options.lockTtl, 'options.lockTtl');
  const lockWaitTimeout =
    options.lockWaitTimeout === undefined
      ? DEFAULT_LOCK_WAIT_TIMEOUT
      : toMilliseconds(options.lockWaitTimeout, 'options.lockWaitTimeout');
  const lockPollInterval =
    options.lockPollInterval === undefined
      ? DEFAULT_LOCK_POLL_INTERVAL
      : toPositiveMilliseconds(options.lockPollInterval, 'options.lockPollInterval');
  const signal = options.signal;
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw new TypeError(`options.signal must be an AbortSignal; got ${kindOf(signal)}`);
  }
  // 0 would time every asynchronous fill out at once (a plausible misreading of "no limit").
  const fillTimeout =
    options.fillTimeout === undefined
      ? undefined
      : toPositiveMilliseconds(options.fillTimeout, 'options.fillTimeout');
  const waitUntil = options.waitUntil;
  if (waitUntil !== undefined && typeof waitUntil !== 'function') {
    throw new TypeError(`options.waitUntil must be a function; got ${kindOf(waitUntil)}`);
  }
  const tags = toTags(options.tags, 'options.tags');
  const check = toValueCheck(options.checkValue, 'options.checkValue');
  const failSafe = resolveFailSafe(options.failSafe);
  const softTimeout =
    options.softTimeout === undefined
      ? undefined
      : toPositiveMilliseconds(options.softTimeout, 'options.softTimeout');
  if (softTimeout !== undefined && failSafe === undefined) {
    throw new TypeError(
      "options.softTimeout needs options.failSafe (it answers with fail-safe's previous value)",
    );
  }
  const early = earlyRefreshBeta(options.earlyRefresh);
  return {
    ttl,
    grace,
    lock,
    lockTtl,
    lockWaitTimeout,
    lockPollInterval,
    signal,
    fillTimeout,
    waitUntil,
    tags,
    check,
    failSafe,
    softTimeout,
    // Without a ttl nothing expires, so nothing is refreshed ahead of expiry.
    earlyRefresh: ttl === undefined ? 0 : early,
    source: options,
  };
}

/** `earlyRefresh` as its beta (0 for off), naming the field at fault. */
function earlyRefreshBeta(option: unknown): number {
  if (option === undefined || option === false) return 0;
  if (option === true) return 1;
  if (typeof option !== 'object' || option === null) {
    throw new TypeError(`options.earlyRefresh must be a boolean or { beta?: number }; got ${kindOf(option)}`);
  }
  checkKnownKeys(option, EARLY_REFRESH_NAMES, 'options.earlyRefresh');
  const beta = (option as EarlyRefreshOptions).beta;
  if (beta === undefined) return 1;
  if (typeof beta !== 'number') {
    throw new TypeError(`options.earlyRefresh.beta must be a number; got ${kindOf(beta)}`);
  }
  if (!(beta > 0 && beta < Number.POSITIVE_INFINITY)) {
    throw new RangeError(`options.earlyRefresh.beta must be a finite number above 0; got ${String(beta)}`);
  }
  return beta;
}

/**
 * The options object last resolved, what it held then, and what it resolved to. A call site that
 * passes the same object every time (the usual `const options = {...}` beside a hot read) skips the
 * validation: every field, and the fields of its nested `failSafe` / `earlyRefresh` objects and its
 * `tags`, is compared with what it held, and so are the names of the fields the objects have (an
 * added one, say a misspelt option, must be refused), so an object changed in place since is
 * resolved again.
 */
/** A snapshot of a caller's options object, taken when it was resolved. */
export interface Remembered {
  readonly source: GetOrComputeOptions;
  readonly ttl: unknown;
  readonly staleWhileRevalidate: unknown;
  readonly distributedFillLock: unknown;
  readonly lockTtl: unknown;
  readonly lockWaitTimeout: unknown;
  readonly lockPollInterval: unknown;
  readonly signal: unknown;
  readonly fillTimeout: unknown;
  readonly earlyRefresh: unknown;
  readonly beta: unknown;
  readonly waitUntil: unknown;
  readonly tags: unknown;
  readonly tagList: readonly unknown[] | undefined;
  readonly checkValue: unknown;
  readonly failSafe: unknown;
  readonly maxStale: unknown;
  readonly throttle: unknown;
  readonly softTimeout: unknown;
  /** The names of the object's enumerable fields, in order (an added one, say a misspelt option, must be refused). */
  readonly keys: readonly string[];
  /** Likewise for the nested `failSafe` and `earlyRefresh` objects, when they are objects. */
  readonly failSafeKeys: readonly string[] | undefined;
  readonly earlyRefreshKeys: readonly string[] | undefined;
  readonly resolved: ResolvedOptions;
}

let remembered: Remembered | undefined;

/** The names `for...in` gives for `bag` (what {@link checkKnownKeys} walks), or `undefined` for a non-object. */
function keysOf(bag: unknown): string[] | undefined {
  if (typeof bag !== 'object' || bag === null) return undefined;
  const keys: string[] = [];
  for (const key in bag) keys.push(key);
  return keys;
}

/** Whether `for...in` over `bag` gives exactly `keys`, in order (no allocation). */
function sameKeys(bag: unknown, keys: readonly string[] | undefined): boolean {
  if (keys === undefined) return true;
  let i = 0;
  for (const key in bag as object) {
    if (key !== keys[i]) return false;
    i++;
  }
  return i === keys.length;
}

function nested(option: unknown, field: 'beta' | 'maxStale' | 'throttle'): unknown {
  return typeof option === 'object' && option !== null
    ? (option as Record<string, unknown>)[field]
    : undefined;
}

/**
 * What {@link resolveOptionsOnce} noted of the options object `resolved` came from, when it was the
 * last one resolved (else `undefined`): {@link holdsSame} then tells whether that object still
 * holds what it held.
 */
export function rememberedFor(resolved: ResolvedOptions): Remembered | undefined {
  const known = remembered;
  return known !== undefined && known.resolved === resolved ? known : undefined;
}

/** Whether `options` still holds every field (and no other) it held when `known` was noted. */
export function holdsSame(options: GetOrComputeOptions, known: Remembered): boolean {
  if (
    options.ttl !== known.ttl ||
    options.staleWhileRevalidate !== known.staleWhileRevalidate ||
    options.distributedFillLock !== known.distributedFillLock ||
    options.lockTtl !== known.lockTtl ||
    options.lockWaitTimeout !== known.lockWaitTimeout ||
    options.lockPollInterval !== known.lockPollInterval ||
    options.signal !== known.signal ||
    options.fillTimeout !== known.fillTimeout ||
    options.earlyRefresh !== known.earlyRefresh ||
    options.waitUntil !== known.waitUntil ||
    options.tags !== known.tags ||
    options.checkValue !== known.checkValue ||
    options.failSafe !== known.failSafe ||
    options.softTimeout !== known.softTimeout ||
    !sameKeys(options, known.keys)
  ) {
    return false;
  }
  if (known.earlyRefresh !== undefined) {
    if (nested(options.earlyRefresh, 'beta') !== known.beta) return false;
    if (!sameKeys(options.earlyRefresh, known.earlyRefreshKeys)) return false;
  }
  if (known.failSafe !== undefined) {
    if (nested(options.failSafe, 'maxStale') !== known.maxStale) return false;
    if (nested(options.failSafe, 'throttle') !== known.throttle) return false;
    if (!sameKeys(options.failSafe, known.failSafeKeys)) return false;
  }
  const list = known.tagList;
  if (list !== undefined) {
    const tags = options.tags as readonly unknown[];
    if (tags.length !== list.length) return false;
    for (let i = 0; i < list.length; i++) if (tags[i] !== list[i]) return false;
  }
  return true;
}

/**
 * {@link resolveOptions}, remembering the last object resolved: the same object, holding the same
 * values, resolves to the same {@link ResolvedOptions} without being checked again.
 */
export function resolveOptionsOnce(options: GetOrComputeOptions): ResolvedOptions {
  const known = remembered;
  if (known !== undefined && known.source === options && holdsSame(options, known)) return known.resolved;
  const resolved = resolveOptions(options);
  const tags = options.tags;
  remembered = {
    source: options,
    ttl: options.ttl,
    staleWhileRevalidate: options.staleWhileRevalidate,
    distributedFillLock: options.distributedFillLock,
    lockTtl: options.lockTtl,
    lockWaitTimeout: options.lockWaitTimeout,
    lockPollInterval: options.lockPollInterval,
    signal: options.signal,
    fillTimeout: options.fillTimeout,
    earlyRefresh: options.earlyRefresh,
    beta: nested(options.earlyRefresh, 'beta'),
    waitUntil: options.waitUntil,
    tags,
    tagList: Array.isArray(tags) ? [...tags] : undefined,
    checkValue: options.checkValue,
    failSafe: options.failSafe,
    maxStale: nested(options.failSafe, 'maxStale'),
    throttle: nested(options.failSafe, 'throttle'),
    softTimeout: options.softTimeout,
    keys: keysOf(options) ?? [],
    failSafeKeys: keysOf(options.failSafe),
    earlyRefreshKeys: keysOf(options.earlyRefresh),
    resolved,
  };
  return resolved;
}
