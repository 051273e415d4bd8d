import { kindOf } from './errors.js';
import { BACKEND_OPERATIONS, type BackendOperation, emit, hasListeners } from './events.js';
import { shared } from './shared.js';

/**
 * Process-wide counters. Once no fill is still in its lock protocol, they obey, whatever the mix of
 * hits, aborts, timeouts, refreshes and locks:
 *
 * 1. Every `getOrCompute`/`getOrComputeWith` call that passes its argument checks counts once in
 *    exactly one of `hits`, `staleHits`, `misses` and `abortedReads`.
 * 2. Every miss joins a fill already in flight (`coalescedWaits`) or starts one, so
 *    `misses - coalescedWaits` is the number of fills started in the foreground.
 * 3. Every started fill, foreground or background refresh, ends its lock protocol in exactly one of
 *    `fills` (the fill function ran), `lockWaitHits` (another replica's value) and `fillsCancelled`
 *    (given up before the fill function ran):
 *    `misses - coalescedWaits + backgroundRefreshes + earlyRefreshes === fills + lockWaitHits + fillsCancelled`.
 * 4. A started fill fails at most once: `fillFailures + fillTimeouts <= fills + fillsCancelled`, and
 *    `backgroundRefreshFailures <= backgroundRefreshes + earlyRefreshes`.
 * 5. A stale hit starts at most one refresh: `backgroundRefreshes + backgroundRefreshesSkipped <= staleHits`.
 * 6. A wait ends at most once without a value or the lock: `lockWaitTimeouts + lockWaitErrors <= lockContended`,
 *    and every `lockWaitErrors` is also a `backendErrors`: `lockWaitErrors <= backendErrors`.
 * 7. Fail-safe answers only for a fill that failed or timed out, once per fill:
 *    `failSafeActivations <= fillFailures + fillTimeouts`.
 * 8. A soft timeout answers the callers of a foreground fill at most once per fill:
 *    `softTimeouts <= misses - coalescedWaits` (the fill it cut short is still counted in `fills`
 *    and, if it later fails, in `fillFailures` or `fillTimeouts`; it is not a `backgroundRefreshes`).
 * 9. On a tiered cache (`createTieredCache`, counted under its own name), every fresh hit was found
 *    in its local or its remote cache: `hits <= l1Hits + l2Hits`. The other caches count 0 in the
 *    four tiered counters.
 * 10. A fresh hit starts at most one early refresh: `earlyRefreshes + earlyRefreshesSkipped <= hits`.
 * 11. `checkValueFailures` counts every value that failed `checkValue`: a cached one read by a call
 *     (that call is also one of `misses`), a fill result (also one of `fillFailures`), a value found
 *     through the lock (the fill then runs instead: not a `lockWaitHits`), one that fail-safe's
 *     confirming read found, one read by `getValue`, and a fill's result refused by the own check
 *     of a caller that joined it (that caller's error; the fill itself succeeded).
 * 12. `tagInvalidations` counts tags (an `invalidateTags` of three tags adds 3), not values.
 */
export interface StampedeStats {
  /** Fresh values served. */
  hits: number;
  /** Stale values served at once inside the stale-while-revalidate grace. */
  staleHits: number;
  /** Calls that found no fresh (or servable stale) value. */
  misses: number;
  /** Calls whose signal aborted before their read answered: neither hits nor misses. */
  abortedReads: number;
  /** Times a fill function ran (foreground and background). */
  fills: number;
  /** Fills that threw or rejected. */
  fillFailures: number;
  /** Fills that did not settle within `fillTimeout`. */
  fillTimeouts: number;
  /**
   * Fills given up before the fill function ran: every caller left, or `fillTimeout` passed, while
   * the distributed lock protocol was still running (only with `distributedFillLock`); or an early
   * refresh that left the refresh to the replica holding the lock (see `earlyRefreshes`).
   */
  fillsCancelled: number;
  /** Misses that awaited a fill already in flight in this process instead of starting one. */
  coalescedWaits: number;
  /** Stale-while-revalidate refreshes started. */
  backgroundRefreshes: number;
  /** Background refreshes that failed (the stale value was kept). */
  backgroundRefreshFailures: number;
  /** Stale reads that did not start a refresh because the process-wide cap was reached. */
  backgroundRefreshesSkipped: number;
  /**
   * `earlyRefresh` refreshes started (fresh hits that drew a refresh ahead of expiry). Not counted
   * in `backgroundRefreshes`, which stale hits start; a failure counts in `backgroundRefreshFailures`.
   * One that finds another replica holding the fill lock leaves the refresh to it: it ends in
   * `lockWaitHits` when that replica's new value is there by its one look (at the holder's expected
   * finish), else in `fillsCancelled`.
   */
  earlyRefreshes: number;
  /** Fresh hits that drew an early refresh but did not start it because the process-wide cap was reached. */
  earlyRefreshesSkipped: number;
  /** Distributed fill locks taken. */
  lockAcquired: number;
  /** Lock attempts that found another holder (counted once per wait). */
  lockContended: number;
  /**
   * Fills answered with another replica's value through the lock instead of running: found while
   * waiting for the lock, or by the lock winner's double-check read.
   */
  lockWaitHits: number;
  /** Waits that gave up after `lockWaitTimeout` and filled locally. */
  lockWaitTimeouts: number;
  /**
   * Waits that ended on a backend fault (a lock attempt after contention failed) and filled locally.
   * A fault on the first lock attempt, before any wait, counts in `backendErrors` only.
   */
  lockWaitErrors: number;
  /** Backend calls that failed or timed out (reads, writes, locks, decoding). */
  backendErrors: number;
  /**
   * Values that failed `checkValue`: cached ones (read as misses) and fill results (failed fills,
   * also counted in `fillFailures`).
   */
  checkValueFailures: number;
  /** Tags invalidated by `invalidateTag`/`invalidateTags` (one per tag, whatever it held). */
  tagInvalidations: number;
  /**
   * Failed or timed-out fills whose callers got the previous value instead of an error (`failSafe`),
   * which was then re-armed fresh for `throttle`. Also counted in `fillFailures` or `fillTimeouts`.
   */
  failSafeActivations: number;
  /**
   * Fills whose callers got the previous value after `softTimeout` while the fill went on in the
   * background.
   */
  softTimeouts: number;
  /** Tiered caches: reads answered by the local cache (L1) with a fresh entry, no remote command. */
  l1Hits: number;
  /**
   * Tiered caches: reads that missed L1 and found an entry in the remote cache (L2), counted per
   * caller (callers that share one read in flight count one each).
   */
  l2Hits: number;
  /**
   * Tiered caches: invalidation bus messages from other replicas acted on: a key evicted from L1
   * because another replica changed it, or a tag invalidation (one per message, however many tags or
   * local copies it concerned).
   */
  busEvictions: number;
  /**
   * Tiered caches: times the invalidation bus came back after a disconnection and the local cache
   * was cleared (messages may have been missed meanwhile).
   */
  busRecoveries: number;
}

/** The counter names of {@link StampedeStats}, in a stable order (a frozen array). */
export const STAT_NAMES: readonly (keyof StampedeStats)[] = Object.freeze([
  'hits',
  'staleHits',
  'misses',
  'abortedReads',
  'fills',
  'fillFailures',
  'fillTimeouts',
  'fillsCancelled',
  'coalescedWaits',
  'backgroundRefreshes',
  'backgroundRefreshFailures',
  'backgroundRefreshesSkipped',
  'earlyRefreshes',
  'earlyRefreshesSkipped',
  'lockAcquired',
  'lockContended',
  'lockWaitHits',
  'lockWaitTimeouts',
  'lockWaitErrors',
  'backendErrors',
  'checkValueFailures',
  'tagInvalidations',
  'failSafeActivations',
  'softTimeouts',
  'l1Hits',
  'l2Hits',
  'busEvictions',
  'busRecoveries',
] as const);

function zero(): StampedeStats {
  return {
    hits: 0,
    staleHits: 0,
    misses: 0,
    abortedReads: 0,
    fills: 0,
    fillFailures: 0,
    fillTimeouts: 0,
    fillsCancelled: 0,
    coalescedWaits: 0,
    backgroundRefreshes: 0,
    backgroundRefreshFailures: 0,
    backgroundRefreshesSkipped: 0,
    earlyRefreshes: 0,
    earlyRefreshesSkipped: 0,
    lockAcquired: 0,
    lockContended: 0,
    lockWaitHits: 0,
    lockWaitTimeouts: 0,
    lockWaitErrors: 0,
    backendErrors: 0,
    checkValueFailures: 0,
    tagInvalidations: 0,
    failSafeActivations: 0,
    softTimeouts: 0,
    l1Hits: 0,
    l2Hits: 0,
    busEvictions: 0,
    busRecoveries: 0,
  };
}

// Shared by every copy of the core loaded in this process (see shared.ts).
const byName = shared.counters;

/** The live counters of the caches named `name` (created on first use). */
export function countersFor(name: string): StampedeStats {
  let counters = byName.get(name);
  if (counters === undefined) {
    counters = zero();
    byName.set(name, counters);
  } else {
    // Created by another copy of the core that may predate a counter this copy knows.
    for (const stat of STAT_NAMES) counters[stat] ??= 0;
  }
  return counters;
}

/** A snapshot of the process-wide counters, summed over every cache. */
export function stats(): StampedeStats {
  const total = zero();
  for (const counters of byName.values()) {
    for (const stat of STAT_NAMES) total[stat] += counters[stat] ?? 0;
  }
  return total;
}

/** A snapshot of the counters per cache name (the label `@stampede/metrics` exports). */
export function statsByCache(): Record<string, StampedeStats> {
  const out: Record<string, StampedeStats> = {};
  for (const [name, counters] of byName) {
    // Counters made by another copy of the core (an older release, without the newest counters)
    // read 0 for those, as in `stats()`.
    const snapshot = zero();
    for (const stat of STAT_NAMES) snapshot[stat] = counters[stat] ?? 0;
    out[name] = snapshot;
  }
  return out;
}

const OPERATIONS: ReadonlySet<string> = new Set(BACKEND_OPERATIONS);

/**
 * Sets every counter back to zero. Meant for tests: exporters such as `@stampede/metrics` read these
 * counters as monotonic, and Prometheus sees a reset as a counter restart.
 */
export function resetStats(): void {
  for (const counters of byName.values()) Object.assign(counters, zero());
}

/**
 * Counts a backend fault and emits a `backend-error` event. Adapters call this for faults the core
 * cannot see (an entry that does not decode, a publish that fails).
 *
 * @throws TypeError naming the argument for a `cacheName` that is not a non-empty string (it would
 * start a counter series of its own), an `operation` that is not a {@link BackendOperation}, or a
 * `key` that is neither a string nor `undefined`
 */
export function reportBackendError(
  cacheName: string,
  operation: BackendOperation,
  key: string | undefined,
  error: unknown,
): void {
  if (typeof cacheName !== 'string' || cacheName.length === 0) {
    throw new TypeError(`reportBackendError: cacheName must be a non-empty string; got ${kindOf(cacheName)}`);
  }
  if (!OPERATIONS.has(operation)) {
    throw new TypeError(
      `reportBackendError: operation must be one of ${BACKEND_OPERATIONS.join(', ')}; got ${typeof operation === 'string' ? `'${operation}'` : kindOf(operation)}`,
    );
  }
  if (key !== undefined && typeof key !== 'string') {
    throw new TypeError(`reportBackendError: key must be a string or undefined; got ${kindOf(key)}`);
  }
  countersFor(cacheName).backendErrors++;
  if (hasListeners()) emit({ type: 'backend-error', cache: cacheName, key, operation, error });
}

/**
 * Tells the user about a condition of the backend that breaks a guarantee (a Redis that may evict
 * the fill lock, a user that may not run scripts): written with `console.warn` and emitted as a
 * `warning` event, as the core's own one-time warnings are. The adapter calls it once per cause;
 * nothing is counted. The console gets each distinct text once per process (caches made alike
 * would print the same line each); the event comes for every call.
 */
export function reportWarning(cacheName: string, message: string): void {
  printWarning(message);
  if (hasListeners()) emit({ type: 'warning', cache: cacheName, message });
}

/** How many distinct warnings are remembered; past it the record starts over (a line may repeat). */
const PRINTED_WARNINGS = 256;

/**
 * Writes `message` with `console.warn`, once per process: caches made alike (one per tenant on one
 * Redis, all with the default name) meet the same condition and would each print the same line. The
 * `warning` event still comes once per cache.
 */
export function printWarning(message: string): void {
  shared.printedWarnings ??= new Set();
  const printed = shared.printedWarnings;
  if (printed.has(message)) return;
  if (printed.size >= PRINTED_WARNINGS) printed.clear();
  printed.add(message);
  console.warn(message);
}
