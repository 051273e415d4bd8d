import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import { sendError } from './http-io.js';
import { errorText } from './redis-reply.js';

/**
 * Serves `/subscribe/<channel>` or `/psubscribe/<pattern>` as server-sent events on a connection of
 * its own: `data: subscribe,<channel>,<count>` once subscribed, then `data: message,<channel>,<payload>`
 * (`pmessage,<pattern>,<channel>,<payload>` for patterns) with raw payloads. When the client goes
 * away the connection is closed, which drops the subscription in Redis.
 */
export function serveSubscription(
  req: IncomingMessage,
  res: ServerResponse,
  base: Redis,
  target: string,
  pattern: boolean,
  track: (connection: Redis, open: boolean) => void,
): void {
  const connection = base.duplicate();
  track(connection, true);
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    connection.disconnect();
    track(connection, false);
    if (!res.writableEnded) res.end();
  };
  req.on('close', close);
  res.on('close', close);

  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.flushHeaders();

  const write = (line: string): void => {
    if (!closed) res.write(`data: ${line}\n\n`);
  };
  if (pattern) {
    connection.on('pmessage', (matched: string, channel: string, message: string) => {
      write(`pmessage,${matched},${channel},${message}`);
    });
  } else {
    connection.on('message', (channel: string, message: string) => write(`message,${channel},${message}`));
  }
  const subscribing = pattern ? connection.psubscribe(target) : connection.subscribe(target);
  subscribing.then(
    (count) => write(`${pattern ? 'psubscribe' : 'subscribe'},${target},${count}`),
    (error: unknown) => {
      if (closed) return;
      if (!res.headersSent) sendError(res, 500, errorText(error));
      close();
    },
  );
}
