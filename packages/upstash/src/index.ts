export type { UpstashClient } from './client.js';
export { isUpstashCacheError, UpstashCacheError, type UpstashCacheErrorCode } from './errors.js';
export { type UpstashKeys, upstashKeys } from './keys.js';
export type { BusLivenessOptions } from './stream-liveness.js';
export { createUpstashCache, type UpstashCache, type UpstashCacheOptions } from './upstash-cache.js';
