import { createTieredCache, type TieredCache } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { describeCacheConformance } from '@stampede/test-suite';
import { randomPrefix, TIERED_ON_REDIS_PROTOCOL_CAPABILITIES, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// The conformance suite on a tiered cache: memory in front of Redis. Each instance (and each
// replica) has its own memory L1 and its own Redis cache on the shared prefix.
const runPrefix = randomPrefix('redis-tiered-conformance');
let client: Redis | undefined;
const remotes: RedisCache[] = [];
const tiered: TieredCache[] = [];
const prefixes = new WeakMap<object, string>();

function tieredOn(redis: Redis, prefix: string): TieredCache {
  const remote = createRedisCache({ client: redis, prefix });
  remotes.push(remote);
  const cache = createTieredCache({ local: createMemoryCache({ max: 1_000 }), remote, localTtl: 60_000 });
  tiered.push(cache);
  prefixes.set(cache, prefix);
  return cache;
}

describeCacheConformance({
  name: 'tiered (memory in front of redis)',
  clock: 'real',
  // Another replica's delete reaches this one's L1 through a bus message, a moment later.
  replicaLag: true,
  // The lock, push wake-up and round trip are the remote's; the bus is consumed, not offered. Tags
  // are invalidated in Redis and carried to the other replicas' L1 by the bus. Its own methods refuse
  // bad arguments before L1 or the remote is touched.
  capabilities: TIERED_ON_REDIS_PROTOCOL_CAPABILITIES,
  async create() {
    client ??= new Redis((await testRedis()).url);
    return tieredOn(client, `${runPrefix}${tiered.length}:`);
  },
  replica(of) {
    const prefix = prefixes.get(of);
    if (client === undefined || prefix === undefined) throw new Error('replica of an unknown cache');
    return tieredOn(client, prefix);
  },
  async teardown() {
    for (const cache of tiered) cache.close();
    await Promise.all(remotes.map((remote) => remote.close()));
    if (client !== undefined) {
      await deletePrefix(client, runPrefix);
      client.disconnect();
    }
  },
});
