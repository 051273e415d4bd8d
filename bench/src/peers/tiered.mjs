// Memory in front of Redis, kept coherent by a bus: stampede's createTieredCache (memory + redis,
// Redis pub/sub bus) and bentocache's L1 + L2 + bus, for the tiered scenario (hits and invalidation
// propagation). Each `create` gets its own ioredis connections on `url`.
import { getOrCompute, invalidate } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { BentoCache, bentostore } from 'bentocache';
import { memoryDriver } from 'bentocache/drivers/memory';
import { redisBusDriver, redisDriver } from 'bentocache/drivers/redis';
import { connect } from '../redis.mjs';
import { miss } from './miss.mjs';

const core = await import('@stampede/core');
let redisModule;
try {
  redisModule = await import('@stampede/redis');
} catch {
  redisModule = undefined;
}

/** Why stampede's tiered cache cannot run here, or `undefined`. */
export const tieredMissing =
  typeof core.createTieredCache !== 'function'
    ? 'createTieredCache is not exported by @stampede/core'
    : redisModule === undefined
      ? 'stampede redis adapter not available'
      : undefined;

const TTL = 300_000;
// The hit cases' entries: primed once in make() and read for the whole of scenario 8a, which lasts
// rounds x cases x the sample length (40 x 3 x 3 s is 6 minutes). A day outlasts any run, so
// neither the entry nor its L1 copy expires while the hits are measured.
const HIT_TTL = 86_400_000;

// `localTtl`: how long an L1 copy lives (createTieredCache's default is 60 s); `undefined` for the
// default.
function stampedeTiered({ url, prefix }, { ttl = TTL, localTtl } = {}) {
  if (tieredMissing !== undefined) throw new Error(tieredMissing);
  const client = connect(url);
  const remote = redisModule.createRedisCache({ client, prefix: `${prefix}stampede:` });
  const cache = core.createTieredCache({
    local: createMemoryCache({ max: 10_000 }),
    remote,
    ...(localTtl === undefined ? {} : { localTtl }),
  });
  return {
    cache,
    get: (key, fill) => getOrCompute(cache, key, ttl, fill),
    invalidate: (key) => invalidate(cache, key),
    async close() {
      await cache.close?.();
      await remote.close();
      await client.quit();
    },
  };
}

function bentoTiered({ url, prefix }, { ttl = TTL } = {}) {
  const client = connect(url);
  const busClient = connect(url);
  const bento = new BentoCache({
    default: 'tiered',
    prefix: `${prefix}bento`,
    stores: {
      tiered: bentostore()
        .useL1Layer(memoryDriver({ maxItems: 10_000 }))
        .useL2Layer(redisDriver({ connection: client }))
        .useBus(redisBusDriver({ connection: busClient })),
    },
  });
  return {
    get: (key, fill) => bento.getOrSet({ key, factory: fill, ttl }),
    invalidate: (key) => bento.delete({ key }),
    async close() {
      await bento.disconnectAll();
      client.disconnect();
      busClient.disconnect();
    },
  };
}

/** Hit cases (scenario 8): `make(keys, { url, prefix })` as in the memory hit scenario. */
export const tieredHitCases = [
  {
    label: 'stampede tiered (memory + redis) getOrCompute, L1 hit',
    kind: 'stampede',
    // The L1 copies make() primes must last as long as the entries: with the default localTtl
    // (60 s) every hit of a sample more than a minute after priming read Redis (a run of 8 rounds
    // of 3 s samples sent 25,260 commands and missed the 0-commands target).
    create: (context) => stampedeTiered(context, { ttl: HIT_TTL, localTtl: HIT_TTL }),
  },
  {
    label: 'bentocache L1 + L2 + bus getOrSet, L1 hit',
    kind: 'peer',
    // bentocache keeps its L1 copy for the entry's ttl.
    create: (context) => bentoTiered(context, { ttl: HIT_TTL }),
  },
].map((c) => ({
  ...c,
  async make(keys, context) {
    const instance = await c.create(context);
    const fill = () => ({ count: 1 });
    for (const key of keys) await instance.get(key, fill);
    const len = keys.length;
    return async (n) => {
      let sink = 0;
      for (let i = 0; i < n; i++) sink += (await instance.get(keys[i % len], miss)).count;
      return sink;
    };
  },
}));

/** Bus variants (invalidation propagation across processes). */
export const tieredBusVariants = [
  { id: 'stampede-tiered', label: 'stampede createTieredCache (Redis pub/sub bus)', create: stampedeTiered },
  { id: 'bentocache-tiered', label: 'bentocache L1 + L2 + redisBusDriver', create: bentoTiered },
];
