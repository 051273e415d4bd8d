/** True for an error Redis itself replied with (as opposed to a connection fault). */
export function isRedisReplyError(error: unknown): error is Error {
  return error instanceof Error && error.name === 'ReplyError';
}

/** The text of any error, for an `{ error }` body. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
