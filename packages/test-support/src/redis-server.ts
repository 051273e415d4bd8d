import { freePort, ping } from './ports.js';
import { type RedisProcess, spawnRedisServer } from './processes.js';

/** A redis-server process this harness started on a free port. */
export type RedisServer = RedisProcess;

/** Starts `redis-server` on a free port with no persistence; `extraArgs` are passed through. */
export async function startRedisServer(extraArgs: readonly string[] = []): Promise<RedisServer> {
  return spawnRedisServer(await freePort(), extraArgs);
}

let shared: Promise<{ url: string; stop: () => Promise<void> }> | undefined;

/**
 * The Redis the integration tests use: `REDIS_URL` if set, else 127.0.0.1:6379 if it answers, else
 * a `redis-server` started from PATH on a free port (stopped by the returned `stop`). None of these:
 * a clear error (never a silent skip).
 */
export function testRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  shared ??= (async () => {
    const fromEnv = process.env.REDIS_URL;
    if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv, stop: async () => {} };
    if (await ping('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', stop: async () => {} };
    const server = await startRedisServer();
    return { url: server.url, stop: () => server.stop() };
  })();
  return shared;
}

/** A random key prefix for one test run: tests clean only their own prefix. */
export function randomPrefix(label = 'test'): string {
  return `stampede-${label}-${process.pid}-${Math.random().toString(36).slice(2, 10)}:`;
}
