import { createOperationRunner } from '@stampede/redis-protocol';
import { RedisCacheError } from './errors.js';

/**
 * Races `command` against `ms` milliseconds, as every call of a Redis cache is (through its
 * context's operation runner). On time-out the promise rejects with an `E_STAMPEDE_BACKEND_TIMEOUT`
 * {@link RedisCacheError}; the command itself cannot be cancelled (it may sit in ioredis's offline
 * queue and run later), so `onLate` is told how it eventually ended.
 */
export function withTimeout<T>(
  command: Promise<T>,
  ms: number,
  what: string,
  key: string | undefined,
  onLate?: (value: T) => void,
): Promise<T> {
  const runner = createOperationRunner({
    name: 'redis',
    label: 'redis',
    operationTimeout: ms,
    createError: (code, message, options) => new RedisCacheError(code, message, options),
  });
  return runner.call(what, key, () => command, onLate);
}
