import { reportWarning } from '@stampede/core/adapter';
import { createKeyStreaks } from './key-streaks.js';

/** Late reads of one key in a row after which the warning is given. */
export const SLOW_READ_STREAK = 3;

/** Notices a key whose reads keep answering only after `operationTimeout`. */
export interface SlowReadWatch {
  /** A read of `key` answered `stored` after its time-out, `elapsedMs` after it was sent. */
  late(key: string, stored: unknown, elapsedMs: number): void;
  /** A read of `key` answered in time: its streak ends. */
  answered(key: string): void;
}

function sizeOf(stored: unknown): string {
  if (typeof stored !== 'string') return 'no value';
  const length = stored.length;
  if (length >= 1_048_576) return `${(length / 1_048_576).toFixed(1)} MB`;
  if (length >= 1_024) return `${(length / 1_024).toFixed(1)} kB`;
  return `${length} bytes`;
}

/**
 * The watch of the cache named `name`. A read that times out is a miss, so a value too large to
 * arrive within `operationTimeout` is never served and is recomputed (and written again) on every
 * call: after {@link SLOW_READ_STREAK} late answers in a row for one key, one warning (for the
 * cache's life) names the key, the value's size and how long the read took.
 */
export function createSlowReadWatch(name: string, operationTimeout: number): SlowReadWatch {
  const streaks = createKeyStreaks(SLOW_READ_STREAK);
  let warned = false;
  return {
    late(key, stored, elapsedMs) {
      if (warned || !streaks.add(key)) return;
      warned = true;
      reportWarning(
        name,
        `stampede: ${SLOW_READ_STREAK} reads in a row of '${key}' in cache '${name}' answered after operationTimeout ` +
          `(${operationTimeout} ms; the last took ${Math.round(elapsedMs)} ms for ${sizeOf(stored)}): a read that ` +
          'times out is a miss, so this value is never served and is recomputed on every call. Raise ' +
          "operationTimeout above the time a read of your largest values takes (see 'Running Redis for stampede' " +
          "in @stampede/redis's README), or store less under one key.",
      );
    },
    answered(key) {
      streaks.end(key);
    },
  };
}
