export type { NodeRedisClient, NodeRedisSubscriber } from './client.js';
export { isNodeRedisCacheError, NodeRedisCacheError, type NodeRedisCacheErrorCode } from './errors.js';
export {
  createNodeRedisCache,
  type NodeRedisCache,
  type NodeRedisCacheOptions,
} from './node-redis-cache.js';
