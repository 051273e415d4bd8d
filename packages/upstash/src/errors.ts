import {
  isRedisProtocolErrorOf,
  RedisProtocolError,
  type RedisProtocolErrorCode,
  replaceMessage,
} from '@stampede/redis-protocol';

/**
 * The stable codes of {@link UpstashCacheError}, shared by every Redis-protocol binding:
 * `E_STAMPEDE_BACKEND_TIMEOUT` (an Upstash request did not answer within `operationTimeout`),
 * `E_STAMPEDE_BACKEND_ENCODE` (a value could not be serialised: it was not stored),
 * `E_STAMPEDE_BACKEND_DECODE` (a stored entry could not be decoded: it was read as a miss).
 */
export type UpstashCacheErrorCode = RedisProtocolErrorCode;

const NAME = 'UpstashCacheError';

/**
 * A fault of `@stampede/upstash` itself (the client's error, if any, is its `cause`). The core never
 * lets one fail a call whose fill succeeds: it reaches you through `onStampedeEvent` as a
 * `backend-error` event, or as the rejection of `setValue` / `invalidate`. A `RedisProtocolError`
 * of `@stampede/redis-protocol`, with the codes every binding shares.
 */
export class UpstashCacheError extends RedisProtocolError {
  constructor(code: UpstashCacheErrorCode, message: string, options?: { key?: string; cause?: unknown }) {
    super(code, message, options);
    this.name = NAME;
  }
}

/**
 * True for an {@link UpstashCacheError}, also one thrown by another copy of this package (checks the
 * `name` and `code`, not only `instanceof`).
 */
export function isUpstashCacheError(error: unknown): error is UpstashCacheError {
  return isRedisProtocolErrorOf(error, UpstashCacheError, NAME);
}

const COMMAND_WAS = ', command was: ';

/**
 * Takes the command's arguments out of an `@upstash/redis` error: its message ends with the whole
 * command as JSON (`ERR ..., command was: ["evalsha", ..., "<the value>"]`), so a cached value
 * (megabytes, or personal data) would reach every `backend-error` event and log line. Keeps the
 * server's reply and the (first) command's name, in the message and the stack. The error is changed
 * in place (it is the client's own, made for this call or its pipeline) and returned; one already
 * redacted is returned as it is.
 */
export function redactCommand(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const original = error.message;
  const at = original.indexOf(COMMAND_WAS);
  const command = original.slice(at + COMMAND_WAS.length);
  // Not the client's JSON (an error redacted already: a pipeline's commands share one).
  if (at === -1 || !command.startsWith('[')) return error;
  // One command (`["evalsha", ...]`) or a pipeline's (`[["evalsha", ...], ...]`): the first name.
  const name = /^[[\s]*"([^"]*)"/.exec(command)?.[1];
  return replaceMessage(
    error,
    `${original.slice(0, at)}${COMMAND_WAS}${name === undefined ? '' : `${name} `}[redacted]`,
  );
}
