import { testRedis } from '@stampede/test-support';
import type { Redis } from 'ioredis';

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

/** Deletes every key that starts with `prefix` (SCAN + DEL): tests clean only their own prefix. */
export async function deletePrefix(client: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${escapeGlob(prefix)}*`, 'COUNT', 500);
    cursor = next;
    if (keys.length !== 0) await client.del(...keys);
  } while (cursor !== '0');
}

/** The shared test Redis (REDIS_URL, 127.0.0.1:6379 or a redis-server started from PATH) as host/port. */
export async function sharedRedis(): Promise<{ url: string; host: string; port: number; auth?: string }> {
  const { url } = await testRedis();
  const parsed = new URL(url);
  const auth =
    parsed.password === ''
      ? undefined
      : `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
  return {
    url,
    host: parsed.hostname,
    port: Number(parsed.port === '' ? 6379 : parsed.port),
    ...(auth === undefined ? {} : { auth }),
  };
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
