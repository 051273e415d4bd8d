/** The stable codes of {@link RedisCacheError}. */
export type RedisCacheErrorCode =
  /** A Redis call did not answer within `operationTimeout`. */
  | 'STAMPEDE_REDIS_TIMEOUT'
  /** A value could not be serialised (a BigInt, a cycle, ...): it was not stored. */
  | 'STAMPEDE_REDIS_ENCODE'
  /** A stored entry could not be decoded: it was read as a miss. */
  | 'STAMPEDE_REDIS_DECODE';

const NAME = 'RedisCacheError';

/**
 * A fault of `@stampede/redis` itself (the underlying Redis error, if any, is its `cause`). The core
 * never lets one fail a call whose fill succeeds: it reaches you through `onStampedeEvent` as a
 * `backend-error` event, or as the rejection of `setValue` / `invalidate`.
 */
export class RedisCacheError extends Error {
  /** A stable code to branch on (never match the message). */
  readonly code: RedisCacheErrorCode;
  /** The cache key concerned, when there is one. */
  readonly key: string | undefined;

  constructor(code: RedisCacheErrorCode, message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = NAME;
    this.code = code;
    this.key = options?.key;
  }
}

/**
 * True for a {@link RedisCacheError}, also one thrown by another copy of this package (checks the
 * `name` and `code`, not only `instanceof`).
 */
export function isRedisCacheError(error: unknown): error is RedisCacheError {
  if (error instanceof RedisCacheError) return true;
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as { name?: unknown; code?: unknown };
  return (
    candidate.name === NAME &&
    typeof candidate.code === 'string' &&
    candidate.code.startsWith('STAMPEDE_REDIS_')
  );
}
