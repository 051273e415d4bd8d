export { freePort } from './ports.js';
export { ping, type RedisServer, randomPrefix, startRedisServer, testRedis } from './redis-server.js';
