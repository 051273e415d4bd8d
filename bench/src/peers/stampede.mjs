// This project: getOrCompute on @stampede/memory, and on @stampede/redis with the distributed fill
// lock (push wake-up, polling only) and without it.
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

/** A redis cache object without `onFillDone`: the core can only poll for the holder's value. */
function withoutPush(cache) {
  return {
    name: cache.name,
    get: (key) => cache.get(key),
    set: (key, entry, options) => cache.set(key, entry, options),
    delete: (key) => cache.delete(key),
    tryAcquireFillLock: (key, ttl) => cache.tryAcquireFillLock(key, ttl),
  };
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
        async close() {
          await redisCache.close();
          await client.quit();
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
  redisMissing,
  redis: [
    redisVariant('stampede-push', 'stampede, lock + push wake-up', 'push'),
    redisVariant('stampede-poll', 'stampede, lock, polling only', 'poll'),
    redisVariant('stampede-nolock', 'stampede, no lock', 'nolock'),
  ],
};
