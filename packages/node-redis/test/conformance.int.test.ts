import { describeCacheConformance } from '@stampede/test-suite';
import { REDIS_PROTOCOL_CAPABILITIES, randomPrefix, testRedis } from '@stampede/test-support';
import { createNodeRedisCache, type NodeRedisCache } from '../src/index.js';
import { connectedClient, deletePrefixWith } from './helpers.js';

const runPrefix = randomPrefix('node-redis-conformance');
let client: Awaited<ReturnType<typeof connectedClient>> | undefined;
const caches: NodeRedisCache[] = [];
const prefixes = new WeakMap<object, string>();

function cacheOn(prefix: string): NodeRedisCache {
  if (client === undefined) throw new Error('no client yet');
  const cache = createNodeRedisCache({ client, prefix });
  caches.push(cache);
  prefixes.set(cache, prefix);
  return cache;
}

describeCacheConformance({
  name: 'node-redis',
  clock: 'real',
  capabilities: REDIS_PROTOCOL_CAPABILITIES,
  async create() {
    client ??= await connectedClient();
    // A prefix per cache: the suite checks that two instances never see each other.
    return cacheOn(`${runPrefix}${caches.length}:`);
  },
  // Another replica: a second cache (its own subscriber, its own core state) on the same prefix.
  replica(of) {
    const prefix = prefixes.get(of);
    if (prefix === undefined) throw new Error('replica of an unknown cache');
    return cacheOn(prefix);
  },
  async teardown() {
    await Promise.all(caches.map((cache) => cache.close()));
    if (client !== undefined) {
      await deletePrefixWith(client, runPrefix);
      client.destroy();
    }
    await (await testRedis()).stop();
  },
});
