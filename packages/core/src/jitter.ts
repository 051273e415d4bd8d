import { type Duration, toMilliseconds } from './duration.js';
import { kindOf } from './errors.js';

/**
 * A TTL spread uniformly over `[base × (1 − fraction), base × (1 + fraction)]`, so keys written
 * together do not all expire together.
 *
 * @param base - the TTL to spread
 * @param fraction - how far to spread it, in `[0, 1]`
 * @returns milliseconds
 * @throws RangeError when `fraction` is outside `[0, 1]` or `base` is not a valid {@link Duration}
 * @example
 * jitteredTtl('5m', 0.2) // somewhere in [240000, 360000]
 */
export function jitteredTtl(base: Duration, fraction: number): number {
  const ms = toMilliseconds(base, 'base');
  if (typeof fraction !== 'number') throw new TypeError(`fraction must be a number; got ${kindOf(fraction)}`);
  if (!(fraction >= 0 && fraction <= 1)) {
    throw new RangeError(`fraction must be in [0, 1]; got ${String(fraction)}`);
  }
  return ms * (1 - fraction + 2 * fraction * Math.random());
}
