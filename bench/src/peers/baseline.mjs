// The no-protection baseline: read, and on a miss every caller runs the fill and writes it.
import { LRUCache } from 'lru-cache';
import { connect } from '../redis.mjs';
import { miss } from './miss.mjs';

function naiveMemory(ttl) {
  const lru = new LRUCache({ max: 10_000 });
  return {
    async get(key, fill) {
      const hit = lru.get(key);
      if (hit !== undefined) return hit;
      const value = await fill();
      lru.set(key, value, { ttl });
      return value;
    },
  };
}

export default {
  id: 'baseline',
  label: 'no protection',
  kind: 'baseline',
  memory: () => naiveMemory(300_000),
  outage: [{ label: 'no protection', feature: 'none', create: ({ ttlMs }) => naiveMemory(ttlMs) }],
  hit: [
    {
      label: 'no protection (async lru get-or-fill)',
      async make(keys) {
        const cache = naiveMemory(300_000);
        const fill = () => ({ count: 1 });
        for (const key of keys) await cache.get(key, fill);
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) sink += (await cache.get(keys[i % len], miss)).count;
          return sink;
        };
      },
    },
  ],
  swr: { feature: 'none (a stale read is a miss)', create: ({ ttlMs }) => naiveMemory(ttlMs) },
  redis: [
    {
      id: 'baseline',
      label: 'no protection (GET / SET PX)',
      lock: false,
      async create({ url, prefix, ttlMs }) {
        const client = connect(url);
        const ns = `${prefix}naive:`;
        return {
          async get(key, fill) {
            const text = await client.get(ns + key);
            if (text !== null) return JSON.parse(text);
            const value = await fill();
            await client.set(ns + key, JSON.stringify(value), 'PX', ttlMs);
            return value;
          },
          close: () => client.quit(),
        };
      },
    },
  ],
};
