// async-cache-dedupe: a defined function on memory storage; on Redis, its redis storage. Its ttl and
// stale are whole seconds. The defined function runs the fill its first caller passed.
import { createCache } from 'async-cache-dedupe';
import { connect } from '../redis.mjs';

function defined(options, name = 'load') {
  const fills = new Map();
  const cache = createCache(options);
  cache.define(name, (key) => {
    const fill = fills.get(key);
    fills.delete(key);
    return fill();
  });
  const load = cache[name];
  return {
    cache,
    load,
    get(key, fill) {
      if (!fills.has(key)) fills.set(key, fill);
      return load(key);
    },
  };
}

const seconds = (ms) => Math.max(1, Math.round(ms / 1_000));

export default {
  id: 'async-cache-dedupe',
  label: 'async-cache-dedupe 3.4.0',
  kind: 'peer',
  memory() {
    return defined({ ttl: 300, storage: { type: 'memory', options: { size: 10_000 } } });
  },
  hit: [
    {
      label: 'async-cache-dedupe (defined function)',
      async make(keys) {
        const { load, get } = defined({ ttl: 300, storage: { type: 'memory', options: { size: 10_000 } } });
        for (const key of keys) await get(key, () => ({ count: 1 }));
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) sink += (await load(keys[i % len])).count;
          return sink;
        };
      },
    },
  ],
  outage: [
    {
      label: 'async-cache-dedupe 3.4.0',
      feature: 'none (an error deletes the key)',
      create: ({ ttlMs }) => defined({ ttl: seconds(ttlMs), storage: { type: 'memory' } }),
    },
  ],
  swr: {
    feature: 'stale',
    create({ ttlMs, graceMs }) {
      return defined({ ttl: seconds(ttlMs), stale: seconds(graceMs), storage: { type: 'memory' } });
    },
  },
  redis: [
    {
      id: 'async-cache-dedupe',
      label: 'async-cache-dedupe (redis storage)',
      lock: false,
      async create({ url, prefix, ttlMs }) {
        const client = connect(url);
        const { get } = defined(
          { ttl: seconds(ttlMs), storage: { type: 'redis', options: { client } } },
          `${prefix}acd`,
        );
        return { get, close: () => client.quit() };
      },
    },
  ],
};
