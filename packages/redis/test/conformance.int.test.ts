import { describeCacheConformance } from '@stampede/test-suite';
import { REDIS_PROTOCOL_CAPABILITIES, randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const runPrefix = randomPrefix('redis-conformance');
let client: Redis | undefined;
const caches: RedisCache[] = [];
const prefixes = new WeakMap<object, string>();

function cacheOn(redis: Redis, prefix: string): RedisCache {
  const cache = createRedisCache({ client: redis, prefix });
  caches.push(cache);
  prefixes.set(cache, prefix);
  return cache;
}

describeCacheConformance({
  name: 'redis (standalone)',
  clock: 'real',
  capabilities: REDIS_PROTOCOL_CAPABILITIES,
  async create() {
    client ??= new Redis((await testRedis()).url);
    // A prefix per cache: the suite checks that two instances never see each other.
    return cacheOn(client, `${runPrefix}${caches.length}:`);
  },
  // Another replica: a second cache (its own subscriber, its own core state) on the same prefix.
  replica(of) {
    const prefix = prefixes.get(of);
    if (client === undefined || prefix === undefined) throw new Error('replica of an unknown cache');
    return cacheOn(client, prefix);
  },
  async teardown() {
    await Promise.all(caches.map((cache) => cache.close()));
    if (client !== undefined) {
      await deletePrefix(client, runPrefix);
      client.disconnect();
    }
    await (await testRedis()).stop();
  },
});
