/** The stable `code` every {@link MetricAlreadyRegisteredError} carries, for checks across package copies. */
export const METRIC_ALREADY_REGISTERED_CODE = 'E_STAMPEDE_METRIC_ALREADY_REGISTERED';

/**
 * Thrown by `registerStampedeMetrics` when the registry already holds a metric with one of the names it
 * would register (most often: it was called twice on the same registry with the same prefix). Nothing
 * is registered when it is thrown. Call `unregister()` on the first handle, or pass another `prefix`.
 */
export class MetricAlreadyRegisteredError extends Error {
  /** Always `'MetricAlreadyRegisteredError'`. */
  override readonly name = 'MetricAlreadyRegisteredError';
  /** Always {@link METRIC_ALREADY_REGISTERED_CODE}. */
  readonly code = METRIC_ALREADY_REGISTERED_CODE;
  /** The name of the metric the registry already holds, e.g. `'stampede_hits_total'`. */
  readonly metricName: string;

  /** @param metricName - the name the registry already holds */
  constructor(metricName: string) {
    super(
      `A metric named '${metricName}' is already registered on this registry: registerStampedeMetrics was ` +
        'probably called twice on it. Call unregister() on the first handle or pass another prefix.',
    );
    this.metricName = metricName;
  }
}

/**
 * True when `error` is a {@link MetricAlreadyRegisteredError}, from this copy of `@stampede/metrics` or
 * any other (it checks `name` and `code`, not only `instanceof`).
 */
export function isMetricAlreadyRegisteredError(error: unknown): error is MetricAlreadyRegisteredError {
  // A type guard answers, whatever it is given: a Proxy whose traps throw is not one of ours.
  try {
    if (error instanceof MetricAlreadyRegisteredError) return true;
    if (typeof error !== 'object' || error === null) return false;
    const candidate = error as { name?: unknown; code?: unknown };
    return (
      candidate.name === 'MetricAlreadyRegisteredError' && candidate.code === METRIC_ALREADY_REGISTERED_CODE
    );
  } catch {
    return false;
  }
}
