/**
 * The stable codes of a Redis-protocol binding's own faults, the same in every binding
 * (`@stampede/redis`, `@stampede/upstash`), in the `E_STAMPEDE_*` style of `@stampede/core`.
 */
export type RedisProtocolErrorCode =
  /** A call to the server did not answer within `operationTimeout`. */
  | 'E_STAMPEDE_BACKEND_TIMEOUT'
  /** A value could not be serialised (a BigInt, a cycle, ...): it was not stored. */
  | 'E_STAMPEDE_BACKEND_ENCODE'
  /** A stored entry could not be decoded: it was read as a miss. */
  | 'E_STAMPEDE_BACKEND_DECODE';

/** What every code of {@link RedisProtocolErrorCode} starts with. */
export const REDIS_PROTOCOL_ERROR_CODE_PREFIX = 'E_STAMPEDE_BACKEND_';

/** Options of a {@link RedisProtocolError}. */
export interface RedisProtocolErrorOptions {
  /** The cache key concerned, when there is one. @default undefined */
  readonly key?: string | undefined;
  /** The underlying error (the client's, the serializer's). @default undefined */
  readonly cause?: unknown;
}

/**
 * A fault of a Redis-protocol binding itself (the underlying error, if any, is its `cause`). The
 * core never lets one fail a call whose fill succeeds: it reaches the application through
 * `onStampedeEvent` as a `backend-error` event, or as the rejection of `setValue` / `invalidate`.
 * Each binding throws its own subclass (`RedisCacheError`, `UpstashCacheError`) so its `name` says
 * which one; the codes are this one set.
 */
export class RedisProtocolError extends Error {
  /** A stable code to branch on (never match the message). */
  readonly code: RedisProtocolErrorCode;
  /** The cache key concerned, when there is one. */
  readonly key: string | undefined;

  constructor(code: RedisProtocolErrorCode, message: string, options?: RedisProtocolErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RedisProtocolError';
    this.code = code;
    this.key = options?.key;
  }
}

/** Builds the binding's error for a code (its own subclass of {@link RedisProtocolError}). */
export type RedisProtocolErrorFactory = (
  code: RedisProtocolErrorCode,
  message: string,
  options?: RedisProtocolErrorOptions,
) => RedisProtocolError;

/**
 * True when `error` looks like a {@link RedisProtocolError} named `name`, also one made by another
 * copy of the package (which `instanceof` would miss): it checks the `name` and the code's prefix.
 */
export function hasRedisProtocolErrorShape(error: unknown, name: string): boolean {
  if (typeof error !== 'object' || error === null) return false;
  // A type guard answers, whatever it is given: a Proxy whose getters throw is not one of ours.
  try {
    const candidate = error as { name?: unknown; code?: unknown };
    return (
      candidate.name === name &&
      typeof candidate.code === 'string' &&
      candidate.code.startsWith(REDIS_PROTOCOL_ERROR_CODE_PREFIX)
    );
  } catch {
    return false;
  }
}

/** True for a {@link RedisProtocolError} (any binding's), also one from another copy of the package. */
export function isRedisProtocolError(error: unknown): error is RedisProtocolError {
  return isRedisProtocolErrorOf(error, RedisProtocolError, 'RedisProtocolError');
}

/**
 * A binding's type guard: `error` is an instance of `type`, or has the shape of one named `name`
 * from another copy of the package ({@link hasRedisProtocolErrorShape}). Never throws, whatever it
 * is given (a Proxy whose traps throw is not one of ours).
 */
export function isRedisProtocolErrorOf(
  error: unknown,
  type: abstract new (...args: never[]) => RedisProtocolError,
  name: string,
): boolean {
  try {
    if (error instanceof type) return true;
  } catch {
    return false;
  }
  return hasRedisProtocolErrorShape(error, name);
}

const ECHO = ', with args beginning with: ';

/**
 * `error` without the arguments Redis echoes in some replies (`ERR unknown command 'evalsha', with
 * args beginning with: '<sha>' '1' '<key>' '<value...>'`): up to 128 characters of the command,
 * which for a write include the start of the cached value. Cut to `[redacted]`, in the message and
 * the stack; anything the reply carries after them (a client's own suffix) is kept. Idempotent.
 */
export function redactServerEcho(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const original = error.message;
  const at = original.indexOf(ECHO);
  if (at === -1 || original.startsWith('[redacted]', at + ECHO.length)) return error;
  // A client's suffix (@upstash/redis's ", command was: ...") follows the echo: kept for its own redaction.
  const suffix = original.indexOf(', command was:', at);
  return replaceMessage(
    error,
    `${original.slice(0, at)}${ECHO}[redacted]${suffix === -1 ? '' : original.slice(suffix)}`,
  );
}

/**
 * `error` with its message replaced by `message`, in the stack too (which repeats it), changed in
 * place and returned: how a binding takes a value out of an error it reports. A frozen error keeps
 * its message (nothing better can be done without losing the error).
 */
export function replaceMessage(error: Error, message: string): Error {
  const original = error.message;
  try {
    error.message = message;
    if (typeof error.stack === 'string') error.stack = error.stack.replace(original, () => message);
  } catch {
    // Frozen: left as it is.
  }
  return error;
}
