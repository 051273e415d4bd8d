export { type RedisClusterServer, startRedisCluster } from './cluster.js';
export { freePort } from './ports.js';
export {
  type RedisProcess,
  redisCliBinary,
  spawnRedisServer,
  spawnWorker,
  type Worker,
} from './processes.js';
export { ping, type RedisServer, randomPrefix, startRedisServer, testRedis } from './redis-server.js';
