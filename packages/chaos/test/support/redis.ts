import { testRedis } from '@stampede/test-support';

export { deletePrefix } from '@stampede/test-support';

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
