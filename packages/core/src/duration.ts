import { kindOf } from './errors.js';
/**
 * A length of time: milliseconds as a number, or a string with one unit:
 * `'250ms'`, `'30s'`, `'5m'`, `'2h'`, `'1d'` (decimals allowed: `'1.5s'`).
 */
export type Duration = number | `${number}${DurationUnit}`;

/** The units a {@link Duration} string may carry. */
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;
// Options objects are usually literals written once; memoising the few distinct strings keeps the
// per-call cost of a string duration at one Map lookup.
const parsed = new Map<string, number>();

/**
 * Converts a {@link Duration} to milliseconds.
 *
 * @param value - the duration
 * @param name - the argument's name, used in the error message
 * @throws TypeError when `value` is neither a number nor a string
 * @throws RangeError when `value` is negative, not finite, or a string that does not parse
 * @example
 * toMilliseconds('30s', 'ttl') // 30000
 */
export function toMilliseconds(value: Duration, name: string): number {
  if (typeof value === 'number') {
    if (value >= 0 && value !== Number.POSITIVE_INFINITY) return value;
    throw new RangeError(
      `${name} must be a finite, non-negative number of milliseconds; got ${String(value)}`,
    );
  }
  if (typeof value !== 'string') {
    throw new TypeError(
      `${name} must be a number of milliseconds or a string like '30s'; got ${kindOf(value)}`,
    );
  }
  const known = parsed.get(value);
  if (known !== undefined) return known;
  const match = PATTERN.exec(value.trim());
  if (match === null) {
    throw new RangeError(`${name} must look like '250ms', '30s', '5m', '2h' or '1d'; got '${value}'`);
  }
  const ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  if (!Number.isFinite(ms)) throw new RangeError(`${name} is too large; got '${value}'`);
  if (parsed.size < 1_000) parsed.set(value, ms);
  return ms;
}

/** Like {@link toMilliseconds}, but `undefined` stays `undefined`. */
export function toOptionalMilliseconds(value: Duration | undefined, name: string): number | undefined {
  return value === undefined ? undefined : toMilliseconds(value, name);
}

/**
 * Like {@link toMilliseconds}, for durations that must be at least 1 ms (a lock's TTL, a poll
 * interval, an adapter's time limit).
 *
 * @throws RangeError when the duration is below 1 ms
 */
export function toPositiveMilliseconds(value: Duration, name: string): number {
  const ms = toMilliseconds(value, name);
  if (ms < 1) throw new RangeError(`${name} must be at least 1ms; got ${ms}`);
  return ms;
}
