export { type ConformanceOptions, describeCacheConformance } from './conformance.js';
