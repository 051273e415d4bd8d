import { shared } from '../src/shared.js';

/**
 * Calls `run` with `Date.now` counted (and taken for the native one by the coarse clock, which
 * otherwise steps aside for a replaced `Date.now`); answers how many times it was read.
 */
export function countingClockReads(run: () => void): number {
  const clock = shared.clock as NonNullable<typeof shared.clock>;
  const native = Date.now;
  let reads = 0;
  const counting = (): number => {
    reads++;
    return native();
  };
  Date.now = counting;
  clock.native = counting;
  try {
    run();
  } finally {
    Date.now = native;
    clock.native = native;
  }
  return reads;
}
