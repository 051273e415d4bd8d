/** The stable codes of {@link UpstashCacheError}. */
export type UpstashCacheErrorCode =
  /** An Upstash request did not answer within `operationTimeout`. */
  | 'STAMPEDE_UPSTASH_TIMEOUT'
  /** A value could not be serialised (a BigInt, a cycle, ...): it was not stored. */
  | 'STAMPEDE_UPSTASH_ENCODE'
  /** A stored entry could not be decoded: it was read as a miss. */
  | 'STAMPEDE_UPSTASH_DECODE';

const NAME = 'UpstashCacheError';

/**
 * A fault of `@stampede/upstash` itself (the client's error, if any, is its `cause`). The core never
 * lets one fail a call whose fill succeeds: it reaches you through `onStampedeEvent` as a
 * `backend-error` event, or as the rejection of `setValue` / `invalidate`.
 */
export class UpstashCacheError extends Error {
  /** A stable code to branch on (never match the message). */
  readonly code: UpstashCacheErrorCode;
  /** The cache key concerned, when there is one. */
  readonly key: string | undefined;

  constructor(code: UpstashCacheErrorCode, message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = NAME;
    this.code = code;
    this.key = options?.key;
  }
}

/**
 * True for an {@link UpstashCacheError}, also one thrown by another copy of this package (checks the
 * `name` and `code`, not only `instanceof`).
 */
export function isUpstashCacheError(error: unknown): error is UpstashCacheError {
  if (error instanceof UpstashCacheError) return true;
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as { name?: unknown; code?: unknown };
  return (
    candidate.name === NAME &&
    typeof candidate.code === 'string' &&
    candidate.code.startsWith('STAMPEDE_UPSTASH_')
  );
}
