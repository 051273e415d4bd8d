export { describeCacheConformance } from './conformance.js';
export type { CacheCapabilities, ConformanceOptions } from './options.js';
