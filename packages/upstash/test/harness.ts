import { randomPrefix, testRedis } from '@stampede/test-support';
import {
  startUpstashRestServer,
  type UpstashRestServer,
  type UpstashRestServerOptions,
} from '@stampede/upstash-rest-server';
import { Redis } from '@upstash/redis';

/** How a test client talks to the REST server. */
export interface ClientMode {
  autoPipelining?: boolean;
  automaticDeserialization?: boolean;
  /** The client's own retries. @default 0 */
  retries?: number;
}

/** A local Upstash REST server in front of the test Redis, with this run's key prefix. */
export interface Harness {
  readonly server: UpstashRestServer;
  /** This run's prefix: every cache the test makes uses a prefix starting with it. */
  readonly prefix: string;
  /** A fresh prefix under {@link Harness.prefix}. */
  nextPrefix(): string;
  client(mode?: ClientMode): Redis;
  /** Deletes every key under this run's prefix, then stops the server. */
  stop(): Promise<void>;
}

export function upstashClient(url: string, token: string, mode: ClientMode = {}): Redis {
  return new Redis({
    url,
    token,
    enableTelemetry: false,
    enableAutoPipelining: mode.autoPipelining ?? true,
    automaticDeserialization: mode.automaticDeserialization ?? true,
    retry: { retries: mode.retries ?? 0 },
  });
}

export async function startHarness(
  label: string,
  serverOptions: Omit<UpstashRestServerOptions, 'redisUrl'> = {},
): Promise<Harness> {
  const { url } = await testRedis();
  const server = await startUpstashRestServer({ ...serverOptions, redisUrl: url });
  const prefix = randomPrefix(label);
  let count = 0;
  return {
    server,
    prefix,
    nextPrefix: () => `${prefix}${++count}:`,
    client: (mode) => upstashClient(server.url, server.token, mode),
    async stop() {
      server.setFault(null);
      const cleaner = upstashClient(server.url, server.token, { autoPipelining: false });
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
