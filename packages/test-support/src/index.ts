export { buildIfStale } from './build.js';
export { type RedisClusterServer, startRedisCluster } from './cluster.js';
export { freePort, ping } from './ports.js';
export {
  type RedisProcess,
  redisCliBinary,
  spawnRedisServer,
  spawnWorker,
  type Worker,
} from './processes.js';
export { type RedisServer, randomPrefix, startRedisServer, testRedis } from './redis-server.js';
