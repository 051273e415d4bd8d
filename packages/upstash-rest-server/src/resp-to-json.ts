/** Where a reply's strings are plain UTF-8 or base64 of their bytes (`Upstash-Encoding: base64`). */
export type ResultEncoding = 'utf8' | 'base64';

/** A JSON value the REST API sends back as `result`. */
export type JsonResult = string | number | null | JsonResult[];

/**
 * Maps an ioredis buffer reply (RESP2) to JSON: integer → number, nil → null, bulk and simple
 * strings → string (base64 of the bytes when asked), array → array, recursively. An error nested
 * in an array (only EXEC produces one) becomes its message.
 */
export function respToJson(reply: unknown, encoding: ResultEncoding): JsonResult {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === 'number') return reply;
  if (Buffer.isBuffer(reply)) return reply.toString(encoding);
  if (typeof reply === 'string') return encoding === 'base64' ? Buffer.from(reply).toString('base64') : reply;
  if (Array.isArray(reply)) return reply.map((item) => respToJson(item, encoding));
  if (reply instanceof Error) return reply.message;
  if (typeof reply === 'bigint') return Number(reply);
  throw new TypeError(`unexpected reply type ${typeof reply}`);
}
