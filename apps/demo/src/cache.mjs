// The cache behind the demo: in-process memory by default; with CACHE=redis, a tiered cache (an
// in-process memory L1 in front of Redis, kept coherent across replicas by Redis's invalidation bus).
// Redis code is imported only when CACHE=redis, so the default mode needs nothing of it.
import { createTieredCache, whenIdle } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { redactUrl } from './config.mjs';

const CONNECT_TIMEOUT_MS = 2_000;

/**
 * @typedef {object} DemoCache
 * @property {import('@stampede/core').Cache} cache
 * @property {string} description - printable (no password)
 * @property {boolean} tiered - an L1 in front of Redis (its L1/L2/bus counters mean something)
 * @property {() => Promise<void>} close
 */

/**
 * Connects to Redis and checks it answers, within a short timeout.
 * @param {string} url
 * @returns {Promise<import('ioredis').Redis>}
 * @throws {Error} saying which (redacted) URL failed and why
 */
export async function connectRedis(url) {
  const { Redis } = await import('ioredis');
  let everReady = false;
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    // Once connected, reconnect after a blip; never retry the first connection (fail fast instead).
    retryStrategy: () => (everReady ? 200 : null),
  });
  /** @type {Error | undefined} */
  let lastError;
  // Connection errors are reported by connect() below, later ones through stampede's stats.
  client.on('error', (error) => {
    lastError = error;
  });
  try {
    await Promise.race([
      client.connect().then(() => client.ping()),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS),
      ),
    ]);
    everReady = true;
    return client;
  } catch (error) {
    client.disconnect();
    const cause = lastError ?? error;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new Error(
      `cannot reach Redis at ${redactUrl(url)} (REDIS_URL): ${reason.replaceAll(url, redactUrl(url))}`,
    );
  }
}

/**
 * @param {import('./config.mjs').Config} config
 * @returns {Promise<DemoCache>}
 */
export async function openCache(config) {
  // On shutdown the cache's refreshes still in flight land before the database closes (within the
  // replica's shutdown grace).
  const timeout = '3s';
  if (config.cache === 'memory') {
    const cache = createMemoryCache({ name: 'memory' });
    return {
      cache,
      description: 'in-process memory cache',
      tiered: false,
      close: async () => {
        await whenIdle(cache, { timeout });
      },
    };
  }
  const { createRedisCache } = await import('@stampede/redis');
  const client = await connectRedis(config.redisUrl);
  const remote = createRedisCache({ client, prefix: config.redisPrefix, name: 'redis' });
  const cache = createTieredCache({
    local: createMemoryCache({ name: 'l1' }),
    remote,
    name: 'tiered',
    localTtl: /** @type {import('@stampede/core').Duration} */ (config.localTtl),
  });
  return {
    cache,
    description: `memory L1 (localTtl ${config.localTtl}) in front of Redis at ${redactUrl(config.redisUrl)} (prefix '${config.redisPrefix}', fill lock ${config.lock ? 'on' : 'off'})`,
    tiered: true,
    close: async () => {
      await cache.close({ timeout });
      await remote.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}
