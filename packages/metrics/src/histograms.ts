import { onStampedeEvent } from '@stampede/core';
import { Histogram } from 'prom-client';
import type { NamedMetric } from './metric-name.js';

/**
 * The default buckets of `stampede_fill_duration_seconds`, in seconds: from 1 ms (an in-memory
 * computation) to 30 s (a slow report query).
 */
export const DEFAULT_FILL_DURATION_BUCKETS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/**
 * The default buckets of `stampede_lock_wait_duration_seconds`, in seconds: from 1 ms to 10 s
 * (longer than a sensible `lockWaitTimeout`).
 */
export const DEFAULT_LOCK_WAIT_DURATION_BUCKETS: readonly number[] = [
  0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** The two histograms fed by core's events. */
export interface DurationHistograms {
  readonly fill: Histogram<'cache' | 'outcome'>;
  readonly lockWait: Histogram<'cache' | 'outcome'>;
  /** Both, with their names, for registering. */
  readonly named: readonly NamedMetric[];
}

/** Checks a bucket list: a non-empty array of finite, strictly increasing numbers. */
export function checkBuckets(buckets: unknown, option: string): asserts buckets is readonly number[] {
  if (!Array.isArray(buckets) || buckets.length === 0)
    throw new TypeError(`options.${option} must be a non-empty array of numbers`);
  let previous = Number.NEGATIVE_INFINITY;
  for (const bound of buckets) {
    if (typeof bound !== 'number' || !Number.isFinite(bound) || bound <= previous)
      throw new TypeError(`options.${option} must hold finite numbers in increasing order`);
    previous = bound;
  }
}

/** Creates the duration histograms, unregistered and not yet fed (see {@link feedHistograms}). */
export function createHistograms(
  prefix: string,
  fillBuckets: readonly number[],
  lockWaitBuckets: readonly number[],
): DurationHistograms {
  const fillName = `${prefix}fill_duration_seconds`;
  const lockWaitName = `${prefix}lock_wait_duration_seconds`;
  const fill = new Histogram({
    name: fillName,
    help: "How long fill functions took, by cache and outcome ('ok', 'error' or 'timeout').",
    labelNames: ['cache', 'outcome'],
    buckets: [...fillBuckets],
    registers: [],
  });
  const lockWait = new Histogram({
    name: lockWaitName,
    help: "How long replicas waited on another replica's fill lock, by cache and outcome ('hit', 'acquired', 'timeout', 'aborted', 'error' or 'yielded').",
    labelNames: ['cache', 'outcome'],
    buckets: [...lockWaitBuckets],
    registers: [],
  });
  return {
    fill,
    lockWait,
    named: [
      { name: fillName, metric: fill },
      { name: lockWaitName, metric: lockWait },
    ],
  };
}

/** Feeds `histograms` from core's `fill` and `lock-wait` events; returns the unsubscribe function. */
export function feedHistograms(histograms: DurationHistograms): () => void {
  return onStampedeEvent((event) => {
    // Only bounded labels: the cache name and the outcome, never the key.
    if (event.type === 'fill') {
      histograms.fill.observe({ cache: event.cache, outcome: event.outcome }, event.durationMs / 1000);
    } else if (event.type === 'lock-wait') {
      histograms.lockWait.observe({ cache: event.cache, outcome: event.outcome }, event.durationMs / 1000);
    }
  });
}
