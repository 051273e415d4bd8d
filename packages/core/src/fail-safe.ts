import { isThenable, writeEntry } from './backend.js';
import { takeRefreshSlot } from './background.js';
import type { CacheEntry } from './cache.js';
import { checkedEntry, storedEntryOf } from './check-value.js';
import { changeEntry } from './entry.js';
import { emit, hasListeners } from './events.js';
import type { Flight } from './flight.js';
import type { ResolvedOptions } from './options.js';
import { raceTimeout } from './race-timeout.js';
import type { CacheState } from './registry.js';
import { reportBackendError } from './stats.js';

/**
 * A previous value that a failing fill of its key may answer with (`failSafe`): the entry the miss
 * read, and until when it may serve.
 */
export interface Fallback {
  /** The entry as a hit returns it: with `checkValue`, the schema's output is its value. */
  readonly entry: CacheEntry;
  /**
   * The same entry as the cache holds it (`entry` itself without a transforming `checkValue`): what
   * a re-arm writes back, so that the re-armed value passes the check as the original did.
   */
  readonly stored: CacheEntry;
  /**
   * `maxStale` past the end of the value's freshness, ms since the epoch. The freshness of a value
   * that was re-armed counts from the fill that produced it (`createdAt + ttl`), not from the
   * re-arm, so re-arming never stretches the limit.
   */
  readonly until: number;
}

// How long an invalidation is remembered for fail-safe: a read that was already in flight when the
// key was invalidated may still return the old entry, and that entry must not become a fallback.
// Reads are bounded by the adapters (about a second); a minute is far beyond any of them.
const INVALIDATION_MEMORY_MS = 60_000;

/**
 * Remembers that `key` was invalidated (or set directly) now: an entry created before this moment
 * never serves as a fail-safe fallback, unless a read that started after the change settled (see
 * {@link settleInvalidation}) returns it. Returns the record's time, for `settleInvalidation`.
 */
export function recordInvalidation(state: CacheState, key: string): number {
  const now = Date.now();
  state.invalidatedAt ??= new Map();
  const records = state.invalidatedAt;
  records.delete(key);
  records.set(key, now);
  state.invalidationSettledAt?.delete(key);
  // Oldest first (insertion order): drop what no read can still be waiting on.
  for (const [oldKey, at] of records) {
    if (now - at < INVALIDATION_MEMORY_MS) break;
    records.delete(oldKey);
    state.invalidationSettledAt?.delete(oldKey);
  }
  return now;
}

/**
 * The backend call of the change {@link recordInvalidation} dated `at` succeeded:
 * unless a later change of `key` was recorded since, a read that starts from now on reads after it.
 */
export function settleInvalidation(state: CacheState, key: string, at: number): void {
  if (state.invalidatedAt?.get(key) !== at) return;
  state.invalidationSettledAt ??= new Map();
  state.invalidationSettledAt.set(key, Date.now());
}

/**
 * Whether an entry created at `createdAt` predates the last change of `key` made here, so must not
 * serve as a fallback. A read that started (`readAt`, this process's clock) once that change had
 * settled returns what the cache holds after it: its entry is taken whatever its `createdAt` says.
 * That matters for a shared cache, whose entries' times come back through an estimate of its
 * server's clock: the very value a `setValue` here wrote (dated by the server) or a fill that started
 * just after an invalidation can read back a few ms before this process's record of the change.
 */
function invalidatedAfter(state: CacheState, key: string, createdAt: number, readAt?: number): boolean {
  const at = state.invalidatedAt?.get(key);
  if (at === undefined || !(createdAt < at)) return false;
  if (readAt === undefined) return true;
  const settled = state.invalidationSettledAt?.get(key);
  return settled === undefined || readAt < settled;
}

/**
 * The fallback `entry` offers for a fill of `key` under `options`, or `undefined`: fail-safe off,
 * no entry, an entry past `maxStale`, or one created before the key was last invalidated here (see
 * {@link invalidatedAfter}; `readAt` is when the read that found it started).
 */
function fallbackFor(
  state: CacheState,
  key: string,
  entry: CacheEntry | undefined,
  options: ResolvedOptions,
  readAt?: number,
): Fallback | undefined {
  const fallback = capturedFallback(entry, options);
  if (fallback === undefined || invalidatedAfter(state, key, fallback.entry.createdAt, readAt))
    return undefined;
  return fallback;
}

/**
 * The fallback a fill takes along from the read that missed (or found the value stale): as
 * {@link fallbackFor}, but not yet checked against this process's invalidations of the key. Nothing
 * answers with it before {@link confirmFallback} has read the key again and decided.
 */
export function capturedFallback(
  entry: CacheEntry | undefined,
  options: ResolvedOptions,
): Fallback | undefined {
  const failSafe = options.failSafe;
  if (failSafe === undefined || entry === undefined) return undefined;
  const freshEnd =
    options.ttl === undefined ? entry.freshUntil : Math.min(entry.freshUntil, entry.createdAt + options.ttl);
  const until = freshEnd + failSafe.maxStale;
  if (!(Date.now() < until)) return undefined;
  return { entry, stored: storedEntryOf(entry), until };
}

/** The fallback of `flight` if it may still answer now: not past its `until`, key not invalidated. */
function usableFallback(flight: Flight): Fallback | undefined {
  const fallback = flight.fallback;
  if (
    fallback === undefined ||
    flight.invalidated ||
    flight.fallbackInvalidated ||
    !(Date.now() < fallback.until)
  ) {
    return undefined;
  }
  return fallback;
}

/**
 * How long the read that confirms a fallback may take before the value read at the miss is used
 * as it is (the cache is then as slow as the source; answering beats waiting).
 */
export const CONFIRM_READ_MS = 250;

/**
 * The value a failed fill of `flight` falls back on, confirmed by reading the cache once more: the
 * fallback was read when the fill started, and the key may have changed since on another replica.
 * The entry found decides: none (deleted, invalidated, or gone): no fallback, the failure stands;
 * the same entry (or its re-armed copy, same `createdAt`): the fallback; another entry (another
 * replica filled or set the key): that entry, within its own `maxStale` and only if it passes
 * `checkValue`. A cache that fails or
 * does not answer within {@link CONFIRM_READ_MS} leaves the fallback read at the miss: when the
 * source and the cache are both down, the last value known is still the best answer.
 */
export function confirmFallback(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
): Fallback | undefined | Promise<Fallback | undefined> {
  const captured = usableFallback(flight);
  if (captured === undefined) return undefined;
  const key = flight.key;
  // Without an answer from the cache, the value read at the miss, unless the key changed here after
  // it was made (that read may have started before the change).
  const unconfirmed = (): Fallback | undefined => {
    const fallback = usableFallback(flight);
    return fallback === undefined || invalidatedAfter(state, key, fallback.entry.createdAt)
      ? undefined
      : fallback;
  };
  const readAt = Date.now();
  const decide = (entry: CacheEntry | undefined): Fallback | undefined | Promise<Fallback | undefined> => {
    if (usableFallback(flight) === undefined || entry === undefined) return undefined;
    if (entry.createdAt === captured.entry.createdAt)
      return invalidatedAfter(state, key, entry.createdAt, readAt) ? undefined : captured;
    // Another entry answers only as a read would serve it: through `checkValue`, when one is set.
    const check = options.check;
    if (check === undefined) return fallbackFor(state, key, entry, options, readAt);
    const checked = checkedEntry(state, key, entry, check);
    return isThenable<CacheEntry | undefined>(checked)
      ? checked.then((passed) => fallbackFor(state, key, passed, options, readAt))
      : fallbackFor(state, key, checked, options, readAt);
  };
  let read: ReturnType<CacheState['cache']['get']>;
  try {
    read = state.cache.get(key);
  } catch (error) {
    reportBackendError(state.name, 'get', key, error);
    return unconfirmed();
  }
  if (!isThenable<CacheEntry | undefined>(read)) return decide(read);
  return raceTimeout(
    Promise.resolve(read),
    CONFIRM_READ_MS,
    () => new Error(`cache.get for '${key}' did not settle within ${CONFIRM_READ_MS}ms`),
  ).then(decide, (error: unknown) => {
    reportBackendError(state.name, 'get', key, error);
    return unconfirmed();
  });
}

/**
 * Fail-safe answered for `flight` with `fallback` (its callers have the value): counts the
 * activation, emits the event and re-arms the value (written fresh for `throttle`, kept in
 * `flight.rearming`).
 */
export function activate(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fallback: Fallback,
  reason: 'error' | 'timeout',
): void {
  const failSafe = options.failSafe;
  if (failSafe === undefined) return;
  const now = Date.now();
  state.counters.failSafeActivations++;
  if (hasListeners()) {
    emit({
      type: 'fail-safe',
      cache: state.name,
      key: flight.key,
      reason,
      staleMs: Math.max(0, now - fallback.entry.freshUntil),
      background: flight.background || flight.early !== undefined,
    });
  }
  flight.rearming = rearm(state, flight.key, fallback, failSafe.throttle, options.grace, now);
}

/**
 * Writes `fallback`'s value back, fresh for `throttle` (never past `until`), so that the next
 * callers here and on other replicas hit it instead of retrying the failing source. It keeps the
 * previous entry's `createdAt`: the never-older rule lets it replace that entry (a tie goes to the
 * write), any real fill that started since then wins over it, and a delete since then (a
 * tombstone, a deletion record) refuses it, so an invalidated key does not come back. Physically it
 * is kept until `until`, so it can serve as a fallback again.
 */
function rearm(
  state: CacheState,
  key: string,
  fallback: Fallback,
  throttle: number,
  grace: number,
  now: number,
): Promise<void> | undefined {
  // The value as the cache holds it (not a schema's output), with its own times.
  const { stored: entry, until } = fallback;
  const freshUntil = Math.min(now + throttle, until);
  // Found fresh at least that long (another replica filled it meanwhile): nothing to re-arm.
  if (entry.freshUntil >= freshUntil) return undefined;
  const staleUntil = Math.max(freshUntil, Math.min(freshUntil + grace, until));
  // Everything else the entry carries (its fill time `delta`, its tags) stays as it was.
  const rearmed = changeEntry(entry, { freshUntil, staleUntil });
  const physical = until > Number.MAX_SAFE_INTEGER ? undefined : until - now;
  return writeEntry(state, key, rearmed, physical, entry);
}

/**
 * The soft timeout of a foreground `flight`, with the fallback {@link confirmFallback} found: when it
 * may still answer and a background-refresh slot is free, answers every caller with that previous
 * value and returns true (the fill goes on, holding the slot until it settles). Otherwise false: the
 * callers keep waiting. The fallback read at the miss is confirmed by reading the key again, as for
 * a failed fill: since the fill started the key or one of its value's tags may have been
 * invalidated (here or, on a shared cache, on another replica), and a previous value is then no
 * answer once that invalidation resolved.
 */
export function softTimeout(state: CacheState, flight: Flight, confirmed: Fallback | undefined): boolean {
  const fallback = confirmed === undefined ? undefined : usableFallback(flight) && confirmed;
  if (fallback === undefined || flight.result !== undefined || flight.early !== undefined) return false;
  if (!takeRefreshSlot()) return false;
  state.counters.softTimeouts++;
  if (hasListeners()) {
    emit({
      type: 'soft-timeout',
      cache: state.name,
      key: flight.key,
      durationMs: Math.max(0, Date.now() - flight.startedAt),
    });
  }
  flight.answerEarly(fallback.entry.value, fallback.entry);
  return true;
}

/**
 * Whether a caller joining `flight` after its soft timeout answered early may have that previous
 * value at once: only when its own options would have answered with it (fail-safe with a
 * `softTimeout`, the entry within this caller's `maxStale`, not invalidated since). Any other caller
 * waits for the fill's own result.
 */
export function takesEarlyAnswer(flight: Flight, options: ResolvedOptions): boolean {
  const early = flight.early;
  if (early === undefined || options.softTimeout === undefined || early.entry === undefined) return false;
  // The early answer was confirmed by a read; a change of the key made here since then marked the
  // flight invalidated.
  if (flight.invalidated || flight.fallbackInvalidated) return false;
  return capturedFallback(early.entry, options) !== undefined;
}
