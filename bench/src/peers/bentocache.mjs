// bentocache: getOrSet on an L1 memory store; on Redis, an L2-only store (redisDriver).
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisDriver } from 'bentocache/drivers/redis';
import { connect } from '../redis.mjs';
import { miss } from './miss.mjs';

function memoryBento(options = {}) {
  return new BentoCache({
    default: 'memory',
    stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })) },
    ...options,
  });
}

export default {
  id: 'bentocache',
  label: 'bentocache 1.6.1',
  kind: 'peer',
  memory() {
    const bento = memoryBento();
    return { get: (key, fill) => bento.getOrSet({ key, factory: fill, ttl: 300_000 }) };
  },
  hit: [
    {
      label: 'bentocache getOrSet',
      async make(keys) {
        const bento = memoryBento();
        const factory = () => ({ count: 1 });
        for (const key of keys) await bento.getOrSet({ key, factory, ttl: 300_000 });
        const len = keys.length;
        return async (n) => {
          let sink = 0;
          for (let i = 0; i < n; i++) {
            sink += (await bento.getOrSet({ key: keys[i % len], factory: miss, ttl: 300_000 })).count;
          }
          return sink;
        };
      },
    },
  ],
  swr: {
    feature: 'grace',
    create({ ttlMs, graceMs }) {
      const bento = memoryBento();
      return { get: (key, fill) => bento.getOrSet({ key, factory: fill, ttl: ttlMs, grace: graceMs }) };
    },
  },
  outage: [
    {
      label: 'bentocache 1.6.1',
      feature: 'grace 1h + graceBackoff (= backoff)',
      create({ ttlMs, backoffMs }) {
        const bento = memoryBento();
        const options = { ttl: ttlMs, grace: '1h', graceBackoff: backoffMs };
        return { get: (key, fill) => bento.getOrSet({ key, factory: fill, ...options }) };
      },
    },
  ],
  redis: [
    {
      id: 'bentocache',
      label: 'bentocache (L2 redisDriver)',
      lock: false,
      async create({ url, prefix, ttlMs }) {
        const client = connect(url);
        const bento = new BentoCache({
          default: 'redis',
          prefix: `${prefix}bento`,
          stores: { redis: bentostore().useL2Layer(redisDriver({ connection: client })) },
        });
        return {
          get: (key, fill) => bento.getOrSet({ key, factory: fill, ttl: ttlMs }),
          async close() {
            await bento.disconnectAll();
            client.disconnect();
          },
        };
      },
    },
  ],
};
