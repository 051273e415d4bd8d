export { isRedisCacheError, RedisCacheError, type RedisCacheErrorCode } from './errors.js';
export { type RedisKeys, redisKeys } from './keys.js';
export { createRedisCache, type RedisCache, type RedisCacheOptions } from './redis-cache.js';
