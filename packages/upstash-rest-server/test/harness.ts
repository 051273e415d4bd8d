import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import {
  startUpstashRestServer,
  type UpstashRestServer,
  type UpstashRestServerOptions,
} from '../src/index.js';

/** A REST server in front of the test Redis, a direct ioredis connection and this run's key prefix. */
export interface Harness {
  readonly server: UpstashRestServer;
  readonly direct: IORedis;
  readonly prefix: string;
  /** A real @upstash/redis client for `server`. */
  client(options?: { autoPipelining?: boolean; base64?: boolean; token?: string }): Redis;
  /** Removes this run's keys and stops everything started. */
  stop(): Promise<void>;
}

export async function startHarness(
  label: string,
  options: Partial<Omit<UpstashRestServerOptions, 'redisUrl'>> = {},
): Promise<Harness> {
  const { url } = await testRedis();
  const server = await startUpstashRestServer({ redisUrl: url, ...options });
  const direct = new IORedis(url);
  const prefix = randomPrefix(label);
  return {
    server,
    direct,
    prefix,
    client: (opts = {}) =>
      new Redis({
        url: server.url,
        token: opts.token ?? server.token,
        enableTelemetry: false,
        enableAutoPipelining: opts.autoPipelining ?? true,
        responseEncoding: opts.base64 === false ? false : 'base64',
        retry: { retries: 0 },
      }),
    async stop() {
      const keys = await direct.keys(`${prefix}*`);
      if (keys.length > 0) await direct.del(...keys);
      direct.disconnect();
      await server.close();
    },
  };
}

/** POSTs `body` to the server's `path` with the right token unless told otherwise. */
export async function post(
  server: UpstashRestServer,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown; contentType: string | null }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), contentType: res.headers.get('content-type') };
}
