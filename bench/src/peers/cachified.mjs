// @epic-web/cachified: cachified() on an lru-cache adapter; on Redis, an ioredis adapter.
import { cachified, totalTtl } from '@epic-web/cachified';
import { LRUCache } from 'lru-cache';
import { connect } from '../redis.mjs';
import { ioredisCacheAdapter } from './cachified-redis-adapter.mjs';
import { miss } from './miss.mjs';

/** cachified's documented lru-cache adapter (v5 ships none: the README shows this one). */
function lruAdapter() {
  const lru = new LRUCache({ max: 10_000 });
  return {
    name: 'lru',
    set(key, value) {
      const ttl = totalTtl(value?.metadata);
      return lru.set(key, value, {
        ttl: ttl === Number.POSITIVE_INFINITY ? undefined : ttl,
        start: value?.metadata?.createdTime,
      });
    },
    get: (key) => lru.get(key),
    delete: (key) => lru.delete(key),
  };
}

export default {
  id: 'cachified',
  label: '@epic-web/cachified 5.6.3',
  kind: 'peer',
  memory() {
    const cache = lruAdapter();
    return { get: (key, fill) => cachified({ key, cache, getFreshValue: fill, ttl: 300_000 }) };
  },
  hit: [
    {
      label: 'cachified (lru-cache adapter)',
      async make(keys) {
        const cache = lruAdapter();
        const getFreshValue = () => ({ count: 1 });
        for (const key of keys) await cachified({ key, cache, getFreshValue, ttl: 300_000 });
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) {
            sink += (await cachified({ key: keys[i % len], cache, getFreshValue: miss, ttl: 300_000 })).count;
          }
          return sink;
        };
      },
    },
  ],
  swr: {
    feature: 'staleWhileRevalidate',
    create({ ttlMs, graceMs }) {
      const cache = lruAdapter();
      return {
        get: (key, fill) =>
          cachified({ key, cache, getFreshValue: fill, ttl: ttlMs, staleWhileRevalidate: graceMs }),
      };
    },
  },
  outage: [
    {
      label: '@epic-web/cachified 5.6.3',
      feature: 'fallbackToCache',
      create({ ttlMs }) {
        const cache = lruAdapter();
        return {
          get: (key, fill) =>
            cachified({
              key,
              cache,
              getFreshValue: fill,
              ttl: ttlMs,
              staleWhileRevalidate: 3_600_000,
              fallbackToCache: true,
            }),
        };
      },
    },
  ],
  redis: [
    {
      id: 'cachified',
      label: 'cachified (ioredis adapter)',
      lock: false,
      async create({ url, prefix, ttlMs }) {
        const client = connect(url);
        const cache = ioredisCacheAdapter(client, `${prefix}cachified:`);
        return {
          get: (key, fill) => cachified({ key, cache, getFreshValue: fill, ttl: ttlMs }),
          close: () => client.quit(),
        };
      },
    },
  ],
};
