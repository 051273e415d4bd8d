export {
  isMetricAlreadyRegisteredError,
  METRIC_ALREADY_REGISTERED_CODE,
  MetricAlreadyRegisteredError,
} from './errors.js';
export { DEFAULT_FILL_DURATION_BUCKETS, DEFAULT_LOCK_WAIT_DURATION_BUCKETS } from './histograms.js';
export {
  registerStampedeMetrics,
  type StampedeMetrics,
  type StampedeMetricsOptions,
} from './register-stampede-metrics.js';
