import { randomPrefix, testRedis } from '@stampede/test-support';
import { startUpstashRestServer, type UpstashRestServer } from '@stampede/upstash-rest-server';
import { Redis } from '@upstash/redis';

/** A local Upstash REST server in front of the test Redis, and this run's key prefix. */
export interface RestServer {
  readonly server: UpstashRestServer;
  /** A fresh prefix under this run's prefix (one per test: its keys start cold). */
  nextPrefix(): string;
  /** A client of the server that hands stored text back as it is. */
  client(): Redis;
  /** Deletes every key under this run's prefix, then stops the server. */
  stop(): Promise<void>;
}

/** Starts `@stampede/upstash-rest-server` over the test Redis (127.0.0.1:6379 or `REDIS_URL`). */
export async function startRestServer(label: string): Promise<RestServer> {
  const { url } = await testRedis();
  const server = await startUpstashRestServer({ redisUrl: url });
  const prefix = randomPrefix(label);
  let count = 0;
  const client = (): Redis =>
    new Redis({
      url: server.url,
      token: server.token,
      enableTelemetry: false,
      enableAutoPipelining: false,
      automaticDeserialization: false,
      retry: { retries: 0 },
    });
  return {
    server,
    nextPrefix: () => `${prefix}${++count}:`,
    client,
    async stop() {
      const cleaner = client();
      let cursor = '0';
      do {
        const [next, keys] = await cleaner.scan(cursor, { match: `${prefix}*`, count: 500 });
        if (keys.length > 0) await cleaner.del(...keys);
        cursor = String(next);
      } while (cursor !== '0');
      await server.close();
    },
  };
}
