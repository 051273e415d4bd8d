import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Redis } from 'ioredis';
import { BadCommandError, parseBatch, parseCommand } from './command.js';
import { ConnectionPool } from './connection-pool.js';
import { FAULTS, type Fault } from './fault.js';
import { BodyTooLargeError, MAX_BODY_BYTES, readBody, sendError, sendJson } from './http-io.js';
import { errorText, isRedisReplyError } from './redis-reply.js';
import { type ResultEncoding, respToJson } from './resp-to-json.js';
import { serveSubscription } from './subscribe.js';
import { type BatchItem, runTransaction } from './transaction.js';

/** Options of {@link startUpstashRestServer}. */
export interface UpstashRestServerOptions {
  /** The Redis every command is forwarded to, e.g. `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The bearer token clients must send. @default a random token */
  token?: string | undefined;
  /** The port to listen on (127.0.0.1). @default 0 (a free port) */
  port?: number | undefined;
  /** A path prefix the API lives under, e.g. `/v1/db`; the returned `url` includes it. @default '' */
  basePath?: string | undefined;
  /**
   * The largest request body, in bytes; a larger one is answered 400 with Upstash's
   * `ERR max request size exceeded` (the client throws an `UpstashError`).
   * @default 10 MB (`MAX_BODY_BYTES`, Upstash's free and pay-as-you-go limit)
   */
  maxRequestBytes?: number | undefined;
}

/** Counters of what the server has served, for tests. */
export interface UpstashRestServerStats {
  /** HTTP requests received (every path, faults included). */
  requests: number;
  /** Redis commands forwarded (each item of a pipeline or transaction counts). */
  commands: number;
  /** `/subscribe` and `/psubscribe` streams opened (each holds a Redis connection while open). */
  subscriptions: number;
}

/** A running local Upstash REST server. */
export interface UpstashRestServer {
  /** The base URL to give `new Redis({ url })`, path prefix included. */
  readonly url: string;
  /** The bearer token to give `new Redis({ token })`. */
  readonly token: string;
  /** The port it listens on. */
  readonly port: number;
  /** Injects `fault` into every request from now on; `null` serves normally (and ends hung requests). */
  setFault(fault: Fault | null): void;
  /** What has been served so far. */
  stats(): UpstashRestServerStats;
  /** Redis connections held open for server-sent-event subscriptions right now. */
  subscriptionCount(): number;
  /** Stops listening, ends every open request and closes every Redis connection. */
  close(): Promise<void>;
}

function tokenMatches(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  const match = /^Bearer (.+)$/i.exec(header.trim());
  if (match === null) return false;
  const given = Buffer.from(match[1] ?? '');
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function normaliseBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  const trimmed = basePath.replace(/\/+$/, '');
  return trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

function randomToken(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString('base64url');
}

/**
 * Starts an HTTP server on 127.0.0.1 that speaks the Upstash REST protocol in front of a real
 * Redis: `POST /` (one command), `/pipeline`, `/multi-exec`, `/subscribe/<channel>` and
 * `/psubscribe/<pattern>` (server-sent events), bearer-token auth and `Upstash-Encoding: base64`.
 *
 * @example
 * const server = await startUpstashRestServer({ redisUrl: 'redis://127.0.0.1:6379' });
 * const redis = new Redis({ url: server.url, token: server.token });
 * await server.close();
 */
export async function startUpstashRestServer(options: UpstashRestServerOptions): Promise<UpstashRestServer> {
  const token = options.token ?? randomToken();
  const basePath = normaliseBasePath(options.basePath);
  const maxRequestBytes = options.maxRequestBytes ?? MAX_BODY_BYTES;
  const redis = new Redis(options.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const pool = new ConnectionPool(redis);
  const subscriptions = new Set<Redis>();
  const sockets = new Set<Socket>();
  const hung = new Set<ServerResponse>();
  const counters: UpstashRestServerStats = { requests: 0, commands: 0, subscriptions: 0 };
  let fault: Fault | null = null;

  // A Redis error is the command's answer (400 on `/`); anything else is the server's fault (500).
  const runOne = async (
    name: string,
    args: string[],
    encoding: ResultEncoding,
  ): Promise<{ item: BatchItem; status: number }> => {
    counters.commands++;
    try {
      return { item: { result: respToJson(await redis.callBuffer(name, ...args), encoding) }, status: 200 };
    } catch (error) {
      return { item: { error: errorText(error) }, status: isRedisReplyError(error) ? 400 : 500 };
    }
  };

  const route = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const encoding: ResultEncoding =
      String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64' ? 'base64' : 'utf8';
    const subscribe = /^\/(p?)subscribe\/(.+)$/.exec(path);
    if (subscribe !== null) {
      const target = decodeURIComponent(subscribe[2] ?? '');
      counters.subscriptions++;
      serveSubscription(req, res, redis, target, subscribe[1] === 'p', (connection, open) => {
        if (open) subscriptions.add(connection);
        else subscriptions.delete(connection);
      });
      return;
    }
    if (path !== '/' && path !== '/pipeline' && path !== '/multi-exec') {
      sendError(res, 404, `no such endpoint: ${req.method} ${path}`);
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req, maxRequestBytes));
    } catch (error) {
      if (error instanceof BodyTooLargeError) sendError(res, 400, error.message);
      else sendError(res, 400, `ERR the body is not valid JSON: ${errorText(error)}`);
      return;
    }
    if (path === '/') {
      const [name, ...args] = parseCommand(body);
      const { item, status } = await runOne(name, args, encoding);
      sendJson(res, status, item);
      return;
    }
    const commands = parseBatch(body);
    if (path === '/pipeline') {
      // Sent back to back on one connection: Redis runs them in order, a failure does not stop the rest.
      const answers = await Promise.all(commands.map(([name, ...args]) => runOne(name, args, encoding)));
      sendJson(
        res,
        200,
        answers.map((answer) => answer.item),
      );
      return;
    }
    counters.commands += commands.length;
    const outcome = await runTransaction(pool, commands, encoding);
    if (outcome.ok) sendJson(res, 200, outcome.items);
    else sendError(res, outcome.status, outcome.error);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    counters.requests++;
    if (fault === 'hang') {
      hung.add(res);
      res.on('close', () => hung.delete(res));
      return;
    }
    if (fault === 'reset') {
      req.socket.destroy();
      return;
    }
    if (fault === '500') {
      sendError(res, 500, 'injected fault: internal server error');
      return;
    }
    if (fault === 'garbage') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>502 Bad Gateway</html>');
      return;
    }
    if (!tokenMatches(req.headers.authorization, token)) {
      sendError(res, 401, 'Unauthorized');
      return;
    }
    const pathname = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (basePath !== '' && pathname !== basePath && !pathname.startsWith(`${basePath}/`)) {
      sendError(res, 404, `no such endpoint: ${req.method} ${pathname}`);
      return;
    }
    const path = pathname.slice(basePath.length) || '/';
    if (req.method !== 'POST') {
      sendError(res, 405, `method ${req.method} not allowed: the REST API takes POST`);
      return;
    }
    try {
      await route(req, res, path);
    } catch (error) {
      if (error instanceof BadCommandError || isRedisReplyError(error)) sendError(res, 400, error.message);
      else sendError(res, 500, errorText(error));
    }
  };

  const server = createServer((req, res) => {
    void handle(req, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  const endHung = (): void => {
    for (const res of hung) res.socket?.destroy();
    hung.clear();
  };

  return {
    url: `http://127.0.0.1:${port}${basePath}`,
    token,
    port,
    setFault(next) {
      if (next !== null && !FAULTS.includes(next)) throw new TypeError(`unknown fault: ${String(next)}`);
      fault = next;
      if (next !== 'hang') endHung();
    },
    stats: () => ({ ...counters }),
    subscriptionCount: () => subscriptions.size,
    async close() {
      endHung();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      for (const connection of subscriptions) connection.disconnect();
      subscriptions.clear();
      pool.close();
      redis.disconnect();
    },
  };
}
