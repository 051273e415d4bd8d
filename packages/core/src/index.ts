// `@stampede/core`: the users' API. What only adapter authors need (envelope, serializers, the
// never-older rule, backend error reporting, timeouts, the Redis-protocol layout) is exported by
// `@stampede/core/adapter` (src/adapter.ts) instead; test/entry-points.test.ts holds the list.
export { configure, type StampedeConfig } from './background.js';
export type {
  Cache,
  CacheBus,
  CacheBusHandlers,
  CacheEntry,
  CacheSetOptions,
  FillAnnouncement,
  FillLock,
  FillLockAttempt,
  FillOutcome,
  MaybePromise,
} from './cache.js';
export type { CheckValue } from './check-value.js';
export type { Duration, DurationUnit } from './duration.js';
export {
  CACHE_BUS_ERROR_CODE,
  CACHE_FILL_ERROR_CODE,
  CacheBusError,
  CacheFillError,
  type CacheFillErrorKind,
  isCacheBusError,
  isCacheFillError,
} from './errors.js';
export {
  type BackendErrorEvent,
  type BackendOperation,
  type BusRecoveryEvent,
  type CheckValueEvent,
  type EarlyRefreshEvent,
  type FailSafeEvent,
  type FillEvent,
  type LockWaitEvent,
  onStampedeEvent,
  type RefreshSkippedEvent,
  type SoftTimeoutEvent,
  type StampedeEvent,
  type StampedeListener,
  type TagInvalidationEvent,
  type WarningEvent,
} from './events.js';
export { getOrCompute, getOrComputeWith } from './get-or-compute.js';
// A diagnostic, kept for users: tests assert with it that no fill is left running.
export { type WhenIdleOptions, whenIdle } from './idle.js';
export { jitteredTtl } from './jitter.js';
export type { EarlyRefreshOptions, FailSafeOptions, FillContext, GetOrComputeOptions } from './options.js';
export { inFlightCount } from './registry.js';
export type { StandardSchemaV1 } from './standard-schema.js';
export { resetStats, STAT_NAMES, type StampedeStats, stats, statsByCache } from './stats.js';
export { invalidateTag, invalidateTags } from './tags.js';
export { createTieredCache, type TieredCache, type TieredCacheOptions } from './tiered.js';
export { type GetValueOptions, getValue, invalidate, type SetValueOptions, setValue } from './values.js';
