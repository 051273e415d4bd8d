import { raceTimeout } from '@stampede/core/adapter';
import { RedisCacheError } from './errors.js';

/**
 * Races `command` against `ms` milliseconds. On time-out the promise rejects with a
 * `STAMPEDE_REDIS_TIMEOUT` {@link RedisCacheError}; the command itself cannot be cancelled (it may
 * sit in ioredis's offline queue and run later), so `onLate` is told how it eventually ended.
 */
export function withTimeout<T>(
  command: Promise<T>,
  ms: number,
  what: string,
  key: string | undefined,
  onLate?: (value: T) => void,
): Promise<T> {
  return raceTimeout(
    command,
    ms,
    () =>
      new RedisCacheError('STAMPEDE_REDIS_TIMEOUT', `redis ${what} did not answer within ${ms}ms`, {
        ...(key === undefined ? {} : { key }),
      }),
    onLate,
  );
}
