import { type CheckValue, toValueCheck, type ValueCheck } from './check-value.js';
import { type Duration, toMilliseconds, toOptionalMilliseconds, toPositiveMilliseconds } from './duration.js';
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
   * This caller stops waiting when it aborts (the promise rejects with the signal's reason); the
   * shared fill goes on for the other callers, and is aborted only when every caller has left.
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
   * Hands a background refresh's promise to the platform so it outlives the request
   * (`ctx.waitUntil` on Cloudflare Workers, `waitUntil` from `@vercel/functions`).
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
   * flight for the key gets that fill's result, checked by the `checkValue` of the call that started it.
   * @default undefined (no check)
   */
  checkValue?: CheckValue | undefined;
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
  /** True when this fill is a stale-while-revalidate background refresh. */
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
}

/** Default lock expiry, ms. */
export const DEFAULT_LOCK_TTL = 10_000;
/** Default lock wait, ms. */
export const DEFAULT_LOCK_WAIT_TIMEOUT = 5_000;
/** Default first poll delay, ms. */
export const DEFAULT_LOCK_POLL_INTERVAL = 50;
/** The poll delay's ceiling, ms. */
export const LOCK_POLL_CEILING = 1_000;

/** The options of a plain `getOrCompute(cache, key, ttl, fill)` call. */
export function ttlOnly(ttl: number | undefined): ResolvedOptions {
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
  };
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as AbortSignal).aborted === 'boolean' &&
    typeof (value as AbortSignal).addEventListener === 'function'
  );
}

/** Validates `options`, naming the field at fault. */
export function resolveOptions(options: GetOrComputeOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options must be an object; got ${options === null ? 'null' : typeof options}`);
  }
  const ttl = toOptionalMilliseconds(options.ttl, 'options.ttl');
  const grace = toOptionalMilliseconds(options.staleWhileRevalidate, 'options.staleWhileRevalidate') ?? 0;
  const lock = options.distributedFillLock ?? false;
  if (typeof lock !== 'boolean') {
    throw new TypeError(`options.distributedFillLock must be a boolean; got ${typeof lock}`);
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
    throw new TypeError('options.signal must be an AbortSignal');
  }
  const fillTimeout = toOptionalMilliseconds(options.fillTimeout, 'options.fillTimeout');
  const waitUntil = options.waitUntil;
  if (waitUntil !== undefined && typeof waitUntil !== 'function') {
    throw new TypeError(`options.waitUntil must be a function; got ${typeof waitUntil}`);
  }
  const tags = toTags(options.tags, 'options.tags');
  const check = toValueCheck(options.checkValue, 'options.checkValue');
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
  };
}
