import { describeCacheConformance } from '@stampede/test-suite';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const runPrefix = randomPrefix('redis-conformance');
let client: Redis | undefined;
const caches: RedisCache[] = [];

describeCacheConformance({
  name: 'redis (standalone)',
  clock: 'real',
  async create() {
    client ??= new Redis((await testRedis()).url);
    // A prefix per cache: the suite checks that two instances never see each other.
    const cache = createRedisCache({ client, prefix: `${runPrefix}${caches.length}:` });
    caches.push(cache);
    return cache;
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
