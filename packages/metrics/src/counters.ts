import { STAT_NAMES, type StampedeStats, statsByCache } from '@stampede/core';
import { Counter } from 'prom-client';
import { type NamedMetric, snakeCase } from './metric-name.js';

const HELP: Record<keyof StampedeStats, string> = {
  hits: 'Fresh values served.',
  staleHits: 'Stale values served at once inside the stale-while-revalidate grace.',
  misses: 'Calls that found no fresh (or servable stale) value.',
  abortedReads: 'Calls whose signal aborted before their read answered (neither hits nor misses).',
  fills: 'Times a fill function ran (foreground and background).',
  fillFailures: 'Fills that threw or rejected.',
  fillTimeouts: 'Fills that did not settle within fillTimeout.',
  fillsCancelled:
    'Fills given up before the fill function ran (every caller left, or fillTimeout passed, during the lock wait; or an early refresh left to the lock holder).',
  coalescedWaits: 'Misses that awaited a fill already in flight in this process instead of starting one.',
  backgroundRefreshes: 'Stale-while-revalidate refreshes started.',
  backgroundRefreshFailures: 'Background refreshes that failed (the stale value was kept).',
  backgroundRefreshesSkipped:
    'Stale reads that did not start a refresh because the process-wide cap was reached.',
  earlyRefreshes:
    'Refreshes started ahead of expiry by earlyRefresh (fresh hits that drew one; not in background_refreshes).',
  earlyRefreshesSkipped:
    'Fresh hits that drew an early refresh but did not start it because the process-wide cap was reached.',
  lockAcquired: 'Distributed fill locks taken.',
  lockContended: 'Lock attempts that found another holder (counted once per wait).',
  lockWaitHits:
    "Fills answered with another replica's value through the lock (while waiting, or by the winner's double-check read).",
  lockWaitTimeouts: 'Lock waits that gave up after lockWaitTimeout and filled locally.',
  lockWaitErrors:
    'Lock waits that ended on a backend fault (a lock attempt during the wait failed) and filled locally.',
  backendErrors: 'Backend calls that failed or timed out (reads, writes, locks, decoding).',
  checkValueFailures:
    'Values that failed checkValue: cached ones (read as misses) and fill results (failed fills).',
  tagInvalidations: 'Tags invalidated by invalidateTag/invalidateTags (one per tag).',
  failSafeActivations:
    'Failed or timed-out fills whose callers got the previous value (failSafe), re-armed fresh for its throttle.',
  softTimeouts:
    'Fills whose callers got the previous value after softTimeout while the fill went on in the background.',
  l1Hits: 'Tiered caches: reads answered by the local cache (L1) with a fresh entry, no remote command.',
  l2Hits: 'Tiered caches: reads that missed L1 and found an entry in the remote cache (L2).',
  busEvictions:
    "Tiered caches: another replica's invalidation bus messages acted on (a key evicted from L1, or a tag invalidation).",
  busRecoveries: 'Tiered caches: invalidation bus reconnections after which the local cache was cleared.',
};

/**
 * One Counter per core stat, `<prefix><snake_case>_total`, labelled `cache`. The values live in core;
 * each scrape copies them in, so the hit path pays nothing and a value is never counted twice.
 */
export function createCounters(prefix: string): NamedMetric[] {
  return STAT_NAMES.map((stat) => {
    const name = `${prefix}${snakeCase(stat)}_total`;
    const metric = new Counter({
      name,
      help: `${HELP[stat]} Read from @stampede/core at scrape time.`,
      labelNames: ['cache'],
      registers: [],
      collect(this: Counter<'cache'>) {
        this.reset();
        // A counter another copy of the core does not keep (an older release in the same
        // process) reads 0: prom-client's inc adds 1 for an undefined amount.
        for (const [cache, counters] of Object.entries(statsByCache()))
          this.inc({ cache }, counters[stat] ?? 0);
      },
    });
    return { name, metric };
  });
}
