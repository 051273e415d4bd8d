// The steady-load scenario's contenders: one hot key on Redis read at a steady rate through
// several expiries. stampede with earlyRefresh (XFetch at beta 1, 0.5 and 0.25, to show how beta
// trades refreshes against the tail near expiry) and with stale-while-revalidate alone (all with
// the distributed fill lock), cache-manager's refreshThreshold, bentocache's grace with a soft
// timeout of 0 (serve the graced value at once and refresh in the background), cachified's
// staleWhileRevalidate. Each `create` opens its own connections. stampede's caches are named after
// their variant, so the child can tell their `early-refresh` events apart.
import { cachified } from '@epic-web/cachified';
import { createKeyv } from '@keyv/redis';
import { getOrComputeWith } from '@stampede/core';
import { BentoCache, bentostore } from 'bentocache';
import { redisDriver } from 'bentocache/drivers/redis';
import { createCache } from 'cache-manager';
import { connect } from '../redis.mjs';
import { ioredisCacheAdapter } from './cachified-redis-adapter.mjs';

async function stampedeRedis({ url, prefix, name }, options) {
  const { createRedisCache } = await import('@stampede/redis');
  const client = connect(url);
  const cache = createRedisCache({ client, prefix, name });
  return {
    get: (key, fill) => getOrComputeWith(cache, key, options, fill),
    async close() {
      await cache.close();
      await client.quit();
    },
  };
}

export const steadyVariants = [
  {
    id: 'stampede-early',
    label: 'stampede, earlyRefresh + lock',
    feature: 'earlyRefresh (XFetch, beta 1)',
    beta: 1,
    create: (context) =>
      stampedeRedis(context, { ttl: context.ttlMs, earlyRefresh: true, distributedFillLock: true }),
  },
  {
    // beta 0.5: at 2,000 reads/s fleet-wide and a 100 ms fill, the smallest beta whose refresh
    // starts less than a fill time before expiry about once in a million expiries (see
    // docs/benchmarks.md, "Steady load").
    id: 'stampede-early-0.5',
    label: 'stampede, earlyRefresh beta 0.5 + lock',
    feature: 'earlyRefresh (XFetch, beta 0.5)',
    beta: 0.5,
    create: (context) =>
      stampedeRedis(context, { ttl: context.ttlMs, earlyRefresh: { beta: 0.5 }, distributedFillLock: true }),
  },
  {
    // beta 0.25: too small for this rate on purpose; its refresh often starts too late to land
    // before expiry, which the waits and the tail near expiry show.
    id: 'stampede-early-0.25',
    label: 'stampede, earlyRefresh beta 0.25 + lock',
    feature: 'earlyRefresh (XFetch, beta 0.25)',
    beta: 0.25,
    create: (context) =>
      stampedeRedis(context, {
        ttl: context.ttlMs,
        earlyRefresh: { beta: 0.25 },
        distributedFillLock: true,
      }),
  },
  {
    id: 'stampede-swr',
    label: 'stampede, SWR + lock',
    feature: 'staleWhileRevalidate',
    create: (context) =>
      stampedeRedis(context, {
        ttl: context.ttlMs,
        staleWhileRevalidate: context.ttlMs,
        distributedFillLock: true,
      }),
  },
  {
    id: 'cache-manager',
    label: 'cache-manager 7.2.9 (@keyv/redis)',
    feature: 'refreshThreshold (a quarter of the ttl)',
    async create({ url, prefix, ttlMs }) {
      const cache = createCache({ stores: [createKeyv(url, { namespace: `${prefix}cm` })] });
      const options = { ttl: ttlMs, refreshThreshold: ttlMs / 4 };
      return { get: (key, fill) => cache.wrap(key, fill, options), close: () => cache.disconnect() };
    },
  },
  {
    id: 'bentocache',
    label: 'bentocache 1.6.1 (L2 redisDriver)',
    feature: 'grace + soft timeout 0',
    async create({ url, prefix, ttlMs }) {
      const client = connect(url);
      const bento = new BentoCache({
        default: 'redis',
        prefix: `${prefix}bento`,
        stores: { redis: bentostore().useL2Layer(redisDriver({ connection: client })) },
      });
      const options = { ttl: ttlMs, grace: '1h', timeout: 0 };
      return {
        get: (key, fill) => bento.getOrSet({ key, factory: fill, ...options }),
        async close() {
          await bento.disconnectAll();
          client.disconnect();
        },
      };
    },
  },
  {
    id: 'cachified',
    label: '@epic-web/cachified 5.6.3 (ioredis adapter)',
    feature: 'staleWhileRevalidate',
    async create({ url, prefix, ttlMs }) {
      const client = connect(url);
      const cache = ioredisCacheAdapter(client, `${prefix}cachified:`);
      return {
        get: (key, fill) =>
          cachified({ key, cache, getFreshValue: fill, ttl: ttlMs, staleWhileRevalidate: ttlMs }),
        close: () => client.quit(),
      };
    },
  },
];
