export { createMemoryCache, type MemoryCache, type MemoryCacheOptions } from './memory-cache.js';
