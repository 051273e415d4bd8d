import { checkKnownKeys, kindOf } from '@stampede/core/adapter';
import { type Registry, type RegistryContentType, register } from 'prom-client';
import { createCounters } from './counters.js';
import { MetricAlreadyRegisteredError } from './errors.js';
import {
  checkBuckets,
  createHistograms,
  DEFAULT_FILL_DURATION_BUCKETS,
  DEFAULT_LOCK_WAIT_DURATION_BUCKETS,
  feedHistograms,
} from './histograms.js';
import { checkPrefix, type NamedMetric } from './metric-name.js';

/** Options of {@link registerStampedeMetrics}. */
export interface StampedeMetricsOptions {
  /**
   * The prom-client registry to register the metrics on.
   * @default prom-client's global registry (`register`)
   */
  registry?: Registry<RegistryContentType>;
  /**
   * Prepended to every metric name. The bundled Grafana dashboard expects the default.
   * @default 'stampede_'
   */
  prefix?: string;
  /**
   * Upper bounds, in seconds, of the `<prefix>fill_duration_seconds` buckets.
   * @default DEFAULT_FILL_DURATION_BUCKETS (1 ms to 30 s)
   */
  fillDurationBuckets?: readonly number[];
  /**
   * Upper bounds, in seconds, of the `<prefix>lock_wait_duration_seconds` buckets.
   * @default DEFAULT_LOCK_WAIT_DURATION_BUCKETS (1 ms to 10 s)
   */
  lockWaitDurationBuckets?: readonly number[];
}

/** What {@link registerStampedeMetrics} returns. */
export interface StampedeMetrics {
  /** The registry the metrics were registered on. */
  readonly registry: Registry<RegistryContentType>;
  /** Every metric name registered, e.g. `'stampede_hits_total'`, `'stampede_fill_duration_seconds'`. */
  readonly metricNames: readonly string[];
  /**
   * Removes every metric this call registered from the registry and stops listening to stampede's
   * events. Calling it again does nothing.
   */
  unregister(): void;
}

const METRICS_OPTIONS: ReadonlySet<string> = new Set([
  'registry',
  'prefix',
  'fillDurationBuckets',
  'lockWaitDurationBuckets',
]);

/**
 * Registers stampede's Prometheus metrics on a prom-client registry: one counter per
 * `@stampede/core` stat (`stampede_hits_total`, `stampede_coalesced_waits_total`, ...), read from
 * `statsByCache()` when the registry is scraped, and the histograms `stampede_fill_duration_seconds`
 * and `stampede_lock_wait_duration_seconds`, fed by stampede's events. Every metric is labelled by
 * cache name (histograms also by outcome), never by key.
 *
 * @throws {MetricAlreadyRegisteredError} when the registry already holds one of the metric names
 *   (for example when called twice on one registry); nothing is registered then.
 * @throws {TypeError} on an invalid `prefix` or bucket list.
 * @example
 * import { registerStampedeMetrics } from '@stampede/metrics';
 * import { register } from 'prom-client';
 *
 * const metrics = registerStampedeMetrics();
 * app.get('/metrics', async (_req, res) => res.type(register.contentType).send(await register.metrics()));
 * // on shutdown, or in tests:
 * metrics.unregister();
 */
export function registerStampedeMetrics(options: StampedeMetricsOptions = {}): StampedeMetrics {
  // A misspelt option (`fillDurationBucket`) would otherwise be ignored; what is not an options
  // object at all is refused too.
  checkKnownKeys(options, METRICS_OPTIONS, 'options');
  const {
    registry = register,
    prefix = 'stampede_',
    fillDurationBuckets = DEFAULT_FILL_DURATION_BUCKETS,
    lockWaitDurationBuckets = DEFAULT_LOCK_WAIT_DURATION_BUCKETS,
  } = options;
  const candidate = registry as Partial<Registry> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.getSingleMetric !== 'function' ||
    typeof candidate.registerMetric !== 'function' ||
    typeof candidate.removeSingleMetric !== 'function'
  ) {
    throw new TypeError(`options.registry must be a prom-client Registry; got ${kindOf(registry)}`);
  }
  checkPrefix(prefix);
  checkBuckets(fillDurationBuckets, 'fillDurationBuckets');
  checkBuckets(lockWaitDurationBuckets, 'lockWaitDurationBuckets');

  const histograms = createHistograms(prefix, fillDurationBuckets, lockWaitDurationBuckets);
  const metrics: readonly NamedMetric[] = [...createCounters(prefix), ...histograms.named];
  // Check every name first so that a conflict registers nothing rather than half the set.
  for (const { name } of metrics) {
    if (registry.getSingleMetric(name) !== undefined) throw new MetricAlreadyRegisteredError(name);
  }
  for (const { metric } of metrics) registry.registerMetric(metric);
  const metricNames = metrics.map(({ name }) => name);
  let stopListening: (() => void) | undefined = feedHistograms(histograms);

  return {
    registry,
    metricNames,
    unregister() {
      if (stopListening === undefined) return;
      stopListening();
      stopListening = undefined;
      for (const { name, metric } of metrics) {
        // Leave alone a metric someone else registered under this name since.
        if (registry.getSingleMetric(name) === metric) registry.removeSingleMetric(name);
      }
    },
  };
}
