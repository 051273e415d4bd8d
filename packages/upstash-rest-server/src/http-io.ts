import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The largest request body served by default, as Upstash's databases on the free and pay-as-you-go
 * plans (10 MB); a larger one gets Upstash's answer, `ERR max request size exceeded`.
 */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** A body over the server's limit. */
export class BodyTooLargeError extends Error {
  override readonly name = 'BodyTooLargeError';
}

/**
 * Reads the whole request body as UTF-8 text; a body over `limit` bytes rejects with
 * {@link BodyTooLargeError} once all of it has arrived (the client is still reading an answer).
 */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit the rest is read and dropped, so that the answer reaches the client.
      if (size <= limit) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > limit) reject(new BodyTooLargeError('ERR max request size exceeded'));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}

/** Sends `body` as JSON with `status`. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Sends `{ error }` with `status`: every non-2xx answer is JSON with an `error` field. */
export function sendError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, { error: message });
}
