// cache-manager 7: wrap() on its default in-memory Keyv; on Redis, Keyv with @keyv/redis.
import { createKeyv } from '@keyv/redis';
import { createCache } from 'cache-manager';
import { miss } from './miss.mjs';

export default {
  id: 'cache-manager',
  label: 'cache-manager 7.2.9',
  kind: 'peer',
  memory() {
    const cache = createCache();
    return { get: (key, fill) => cache.wrap(key, fill, 300_000) };
  },
  hit: [
    {
      label: 'cache-manager wrap',
      async make(keys) {
        const cache = createCache();
        const fill = () => ({ count: 1 });
        for (const key of keys) await cache.wrap(key, fill, 300_000);
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) sink += (await cache.wrap(keys[i % len], miss, 300_000)).count;
          return sink;
        };
      },
    },
  ],
  // No serve-stale-after-expiry; its refresh-ahead is the nearest feature: with ttl = ttl + grace
  // and refreshThreshold = grace, a read in the last `grace` ms returns the value and refreshes it
  // in the background, which is the same window as ttl + stale-while-revalidate.
  swr: {
    feature: 'refreshThreshold (refresh-ahead)',
    create({ ttlMs, graceMs }) {
      const cache = createCache();
      const options = { ttl: ttlMs + graceMs, refreshThreshold: graceMs };
      return { get: (key, fill) => cache.wrap(key, fill, options) };
    },
  },
  outage: [
    {
      label: 'cache-manager 7.2.9',
      feature: 'none',
      create({ ttlMs }) {
        const cache = createCache();
        return { get: (key, fill) => cache.wrap(key, fill, ttlMs) };
      },
    },
  ],
  redis: [
    {
      id: 'cache-manager',
      label: 'cache-manager (@keyv/redis)',
      lock: false,
      async create({ url, prefix, ttlMs }) {
        const keyv = createKeyv(url, { namespace: `${prefix}cm` });
        const cache = createCache({ stores: [keyv] });
        return {
          get: (key, fill) => cache.wrap(key, fill, ttlMs),
          close: () => cache.disconnect(),
        };
      },
    },
  ],
};
