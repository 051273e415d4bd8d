export { buildIfStale } from './build.js';
export { REDIS_PROTOCOL_CAPABILITIES, TIERED_ON_REDIS_PROTOCOL_CAPABILITIES } from './capabilities.js';
export { deletePrefix } from './cleanup.js';
export { type RedisClusterServer, startRedisCluster } from './cluster.js';
export { freePort, ping } from './ports.js';
export {
  broadcast,
  type RedisProcess,
  type RunToExit,
  redisCliBinary,
  runToExit,
  spawnRedisServer,
  spawnWorker,
  startWorkers,
  type Worker,
} from './processes.js';
export { type RedisServer, randomPrefix, startRedisServer, testRedis } from './redis-server.js';
export { describeValue, NOT_STORABLE, SERIALIZER_TABLE } from './serializer-table.js';
export { hasFastProperties } from './v8.js';
export {
  type Deferred,
  deferred,
  delay,
  readsTimingOut,
  type Truthy,
  type WaitForOptions,
  waitFor,
} from './wait.js';
