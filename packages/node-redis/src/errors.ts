import {
  isRedisProtocolErrorOf,
  RedisProtocolError,
  type RedisProtocolErrorCode,
} from '@stampede/redis-protocol';

/** The stable codes of {@link NodeRedisCacheError}, shared by every Redis-protocol binding. */
export type NodeRedisCacheErrorCode = RedisProtocolErrorCode;

const NAME = 'NodeRedisCacheError';

/**
 * A fault of `@stampede/node-redis` itself (the underlying Redis error, if any, is its `cause`):
 * a `RedisProtocolError` with the codes every binding shares. It reaches you through
 * `onStampedeEvent` as a `backend-error` event, or as the rejection of `setValue` / `invalidate`.
 */
export class NodeRedisCacheError extends RedisProtocolError {
  constructor(code: NodeRedisCacheErrorCode, message: string, options?: { key?: string; cause?: unknown }) {
    super(code, message, options);
    this.name = NAME;
  }
}

/** True for a {@link NodeRedisCacheError}, also one thrown by another copy of this package. */
export function isNodeRedisCacheError(error: unknown): error is NodeRedisCacheError {
  return isRedisProtocolErrorOf(error, NodeRedisCacheError, NAME);
}
