import { kindOf } from '@stampede/core/adapter';
import type { Metric } from 'prom-client';

/** A metric and its name (prom-client's types do not expose `name`). */
export interface NamedMetric {
  readonly name: string;
  readonly metric: Metric<string>;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** `coalescedWaits` → `coalesced_waits`. */
export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** Throws a TypeError unless `prefix` can start a Prometheus metric name (the empty string can). */
export function checkPrefix(prefix: unknown): asserts prefix is string {
  if (typeof prefix !== 'string')
    throw new TypeError(`options.prefix must be a string; got ${kindOf(prefix)}`);
  if (prefix !== '' && !METRIC_NAME.test(prefix))
    throw new TypeError(
      `options.prefix must match ${METRIC_NAME.source} (letters, digits, '_' and ':'); got ${JSON.stringify(prefix)}`,
    );
}
