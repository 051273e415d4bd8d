// This project: getOrCompute on @stampede/memory, on @stampede/redis with the distributed fill
// lock (push wake-up, polling only) and without it, and on @stampede/upstash with the lock (push
// wake-up, polling only) through a local Upstash REST server in front of the same Redis.
import * as core from '@stampede/core';
import { getOrCompute, getOrComputeWith } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { connect } from '../redis.mjs';
import { miss } from './miss.mjs';

let redisModule;
let redisMissing;
try {
  redisModule = await import('@stampede/redis');
  if (typeof redisModule.createRedisCache !== 'function') redisMissing = 'createRedisCache is not exported';
} catch (error) {
  redisMissing = error instanceof Error ? error.message.split('\n')[0] : String(error);
}

let upstashModule;
let upstashMissing;
try {
  upstashModule = await import('@stampede/upstash');
  const { Redis } = await import('@upstash/redis');
  upstashModule = { ...upstashModule, Redis };
  if (typeof upstashModule.createUpstashCache !== 'function')
    upstashMissing = 'createUpstashCache is not exported';
} catch (error) {
  upstashMissing = error instanceof Error ? error.message.split('\n')[0] : String(error);
}

/** A redis cache object without `onFillDone`: the core can only poll for the holder's value. */
function withoutPush(cache) {
  return {
    name: cache.name,
    get: (key) => cache.get(key),
    set: (key, entry, options) => cache.set(key, entry, options),
    delete: (key) => cache.delete(key),
    tryAcquireFillLock: (key, ttl) => cache.tryAcquireFillLock(key, ttl),
    tryAcquireFillLockAndRead: (key, ttl) => cache.tryAcquireFillLockAndRead(key, ttl),
  };
}

/**
 * Resolves once the cache created on `client` has finished its warm-up: a PING sent now is answered
 * after the warm-up's SCRIPT LOADs, TIME and CONFIG GET (one connection answers in order), and a
 * subscription acknowledged on `pushCache`'s subscriber shows that connection is up. A fleet
 * process reports itself ready only then: the first herd measures a process that has started, as
 * after a deploy, not one still opening its connections.
 */
async function warmedUp(client, pushCache) {
  await client.ping();
  if (pushCache === undefined) return;
  let stop;
  await new Promise((resolve) => {
    stop = pushCache.onFillDone('bench:ready', () => {}, resolve);
  });
  stop?.();
}

function redisVariant(id, label, mode) {
  return {
    id,
    label,
    lock: mode !== 'nolock',
    async create({ url, prefix, ttlMs }) {
      if (redisMissing !== undefined) throw new Error('stampede redis adapter not available');
      const client = connect(url);
      const redisCache = redisModule.createRedisCache({ client, prefix: `${prefix}${id}:` });
      const cache = mode === 'poll' ? withoutPush(redisCache) : redisCache;
      const options = { ttl: ttlMs, distributedFillLock: mode !== 'nolock' };
      return {
        get: (key, fill) => getOrComputeWith(cache, key, options, fill),
        ready: () => warmedUp(client, mode === 'push' ? redisCache : undefined),
        async close() {
          await redisCache.close();
          await client.quit();
        },
      };
    },
  };
}

/** A tiered cache (memory in front of `@stampede/redis`, with its bus) with the lock and push wake-up. */
function tieredVariant(id, label) {
  return {
    id,
    label,
    lock: true,
    async create({ url, prefix, ttlMs }) {
      if (redisMissing !== undefined) throw new Error('stampede redis adapter not available');
      if (typeof core.createTieredCache !== 'function') throw new Error('createTieredCache is not exported');
      const client = connect(url);
      const remote = redisModule.createRedisCache({ client, prefix: `${prefix}${id}:` });
      const cache = core.createTieredCache({ local: createMemoryCache({ max: 10_000 }), remote });
      const options = { ttl: ttlMs, distributedFillLock: true };
      return {
        get: (key, fill) => getOrComputeWith(cache, key, options, fill),
        ready: () => warmedUp(client, remote),
        async close() {
          await cache.close?.();
          await remote.close();
          await client.quit();
        },
      };
    },
  };
}

/**
 * `@stampede/upstash` with the lock, over HTTP to the REST server at `upstash.url`: push wake-up
 * (the default) or polling only (`pushWakeUp: false`).
 */
function upstashVariant(id, label, mode) {
  return {
    id,
    label,
    lock: true,
    async create({ prefix, ttlMs, upstash }) {
      if (upstashMissing !== undefined)
        throw new Error(`stampede upstash adapter not available: ${upstashMissing}`);
      if (upstash === undefined) throw new Error('no Upstash REST server');
      const client = new upstashModule.Redis({
        url: upstash.url,
        token: upstash.token,
        enableTelemetry: false,
        retry: { retries: 0 },
      });
      const cache = upstashModule.createUpstashCache({
        client,
        prefix: `${prefix}${id}:`,
        pushWakeUp: mode === 'push',
      });
      const options = { ttl: ttlMs, distributedFillLock: true };
      return {
        get: (key, fill) => getOrComputeWith(cache, key, options, fill),
        async close() {
          // The client holds no connection of its own beyond fetch's idle sockets.
        },
      };
    },
  };
}

export default {
  id: 'stampede',
  label: 'stampede',
  kind: 'stampede',
  memory() {
    const cache = createMemoryCache({ max: 10_000 });
    return { get: (key, fill) => getOrCompute(cache, key, '5m', fill) };
  },
  hit: [
    {
      label: 'stampede getOrCompute',
      async make(keys) {
        const cache = createMemoryCache({ max: 10_000 });
        const fill = () => ({ count: 1 });
        for (const key of keys) await getOrCompute(cache, key, '5m', fill);
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) sink += (await getOrCompute(cache, keys[i % len], '5m', miss)).count;
          return sink;
        };
      },
    },
    {
      label: 'stampede getOrComputeWith (ttl + SWR options)',
      async make(keys) {
        const cache = createMemoryCache({ max: 10_000 });
        const fill = () => ({ count: 1 });
        const options = { ttl: '5m', staleWhileRevalidate: '1m' };
        for (const key of keys) await getOrComputeWith(cache, key, options, fill);
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) {
            sink += (await getOrComputeWith(cache, keys[i % len], options, miss)).count;
          }
          return sink;
        };
      },
    },
  ],
  swr: {
    feature: 'staleWhileRevalidate',
    create({ ttlMs, graceMs }) {
      const cache = createMemoryCache({ max: 10_000 });
      const options = { ttl: ttlMs, staleWhileRevalidate: graceMs };
      return { get: (key, fill) => getOrComputeWith(cache, key, options, fill) };
    },
  },
  outage: [
    {
      label: 'stampede, failSafe',
      feature: 'failSafe (throttle = backoff)',
      create({ ttlMs, backoffMs }) {
        const cache = createMemoryCache({ max: 10_000 });
        const options = { ttl: ttlMs, failSafe: { maxStale: '1h', throttle: backoffMs } };
        return { get: (key, fill) => getOrComputeWith(cache, key, options, fill) };
      },
    },
    {
      label: 'stampede, no failSafe',
      feature: 'none',
      create({ ttlMs }) {
        const cache = createMemoryCache({ max: 10_000 });
        return { get: (key, fill) => getOrComputeWith(cache, key, { ttl: ttlMs }, fill) };
      },
    },
  ],
  redisMissing,
  redis: [
    redisVariant('stampede-push', 'stampede, lock + push wake-up', 'push'),
    redisVariant('stampede-poll', 'stampede, lock, polling only', 'poll'),
    redisVariant('stampede-nolock', 'stampede, no lock', 'nolock'),
    tieredVariant('stampede-tiered', 'stampede tiered (memory + redis), lock + push wake-up'),
  ],
  upstashMissing,
  upstash: [
    upstashVariant('stampede-upstash-push', 'stampede upstash, lock + push wake-up', 'push'),
    upstashVariant('stampede-upstash-poll', 'stampede upstash, lock, polling only', 'poll'),
  ],
};
