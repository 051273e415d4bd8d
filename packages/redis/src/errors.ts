import {
  isRedisProtocolErrorOf,
  RedisProtocolError,
  type RedisProtocolErrorCode,
} from '@stampede/redis-protocol';

/**
 * The stable codes of {@link RedisCacheError}, shared by every Redis-protocol binding:
 * `E_STAMPEDE_BACKEND_TIMEOUT` (a Redis call did not answer within `operationTimeout`),
 * `E_STAMPEDE_BACKEND_ENCODE` (a value could not be serialised: it was not stored),
 * `E_STAMPEDE_BACKEND_DECODE` (a stored entry could not be decoded: it was read as a miss).
 */
export type RedisCacheErrorCode = RedisProtocolErrorCode;

const NAME = 'RedisCacheError';

/**
 * A fault of `@stampede/redis` itself (the underlying Redis error, if any, is its `cause`). The core
 * never lets one fail a call whose fill succeeds: it reaches you through `onStampedeEvent` as a
 * `backend-error` event, or as the rejection of `setValue` / `invalidate`. A `RedisProtocolError`
 * of `@stampede/redis-protocol`, with the codes every binding shares.
 */
export class RedisCacheError extends RedisProtocolError {
  constructor(code: RedisCacheErrorCode, message: string, options?: { key?: string; cause?: unknown }) {
    super(code, message, options);
    this.name = NAME;
  }
}

/**
 * True for a {@link RedisCacheError}, also one thrown by another copy of this package (checks the
 * `name` and `code`, not only `instanceof`).
 */
export function isRedisCacheError(error: unknown): error is RedisCacheError {
  return isRedisProtocolErrorOf(error, RedisCacheError, NAME);
}
