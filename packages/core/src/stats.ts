import { type BackendOperation, emit, hasListeners } from './events.js';
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
 *    `misses - coalescedWaits + backgroundRefreshes === fills + lockWaitHits + fillsCancelled`.
 * 4. A started fill fails at most once: `fillFailures + fillTimeouts <= fills + fillsCancelled`, and
 *    `backgroundRefreshFailures <= backgroundRefreshes`.
 * 5. A stale hit starts at most one refresh: `backgroundRefreshes + backgroundRefreshesSkipped <= staleHits`.
 * 6. A wait ends at most once without a value or the lock: `lockWaitTimeouts + lockWaitErrors <= lockContended`,
 *    and every `lockWaitErrors` is also a `backendErrors`: `lockWaitErrors <= backendErrors`.
 * 7. `checkValueFailures` counts every value that failed `checkValue`: a cached one read by a call
 *    (that call is also one of `misses`), a fill result (also one of `fillFailures`), a value found
 *    through the lock (the fill then runs instead: not a `lockWaitHits`), and one read by `getValue`.
 * 8. `tagInvalidations` counts tags (an `invalidateTags` of three tags adds 3), not values.
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
   * the distributed lock protocol was still running (only with `distributedFillLock`).
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
}

/** The counter names of {@link StampedeStats}, in a stable order. */
export const STAT_NAMES: readonly (keyof StampedeStats)[] = [
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
  'lockAcquired',
  'lockContended',
  'lockWaitHits',
  'lockWaitTimeouts',
  'lockWaitErrors',
  'backendErrors',
  'checkValueFailures',
  'tagInvalidations',
];

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
    lockAcquired: 0,
    lockContended: 0,
    lockWaitHits: 0,
    lockWaitTimeouts: 0,
    lockWaitErrors: 0,
    backendErrors: 0,
    checkValueFailures: 0,
    tagInvalidations: 0,
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
  for (const [name, counters] of byName) out[name] = { ...counters };
  return out;
}

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
 */
export function reportBackendError(
  cacheName: string,
  operation: BackendOperation,
  key: string | undefined,
  error: unknown,
): void {
  countersFor(cacheName).backendErrors++;
  if (hasListeners()) emit({ type: 'backend-error', cache: cacheName, key, operation, error });
}
