export { configure, type StampedeConfig } from './background.js';
export type { Cache, CacheEntry, CacheSetOptions, FillLock, FillOutcome, MaybePromise } from './cache.js';
export { type Duration, type DurationUnit, toMilliseconds, toPositiveMilliseconds } from './duration.js';
export {
  decodeEnvelope,
  ENVELOPE_VERSION,
  type Envelope,
  encodeEnvelope,
  integerText,
  jsonSerializer,
  type LegacySerializer,
  parseValue,
  roundTripValue,
  type Serializer,
  type SerializerOption,
  stringifyValue,
  toSerializer,
} from './envelope.js';
export {
  CACHE_FILL_ERROR_CODE,
  CacheFillError,
  type CacheFillErrorKind,
  isCacheFillError,
  messageOf,
} from './errors.js';
export {
  type BackendErrorEvent,
  type BackendOperation,
  type FillEvent,
  type LockWaitEvent,
  onStampedeEvent,
  type RefreshSkippedEvent,
  type StampedeEvent,
  type StampedeListener,
  type WarningEvent,
} from './events.js';
export { getOrCompute, getOrComputeWith } from './get-or-compute.js';
export { jitteredTtl } from './jitter.js';
export type { FillContext, GetOrComputeOptions } from './options.js';
export { inFlightCount } from './registry.js';
export {
  checkRemotePrefix,
  createServerClock,
  DELETE_LUA,
  decodeStored,
  EXTEND_LOCK_LUA,
  MAX_PX,
  pxArgument,
  RELEASE_LOCK_LUA,
  type RemoteKeys,
  type RemoteWriteOptions,
  raceTimeout,
  remoteKeys,
  remoteWriteArgs,
  SERVER_TIME_LUA,
  type ServerClock,
  type ServerClockOptions,
  TOMBSTONE_PREFIX,
  tombstone,
  WRITE_GUARD_LUA,
  type WriteGuardArgs,
  writeGuardArgs,
} from './remote.js';
export {
  reportBackendError,
  resetStats,
  STAT_NAMES,
  type StampedeStats,
  stats,
  statsByCache,
} from './stats.js';
export { type GetValueOptions, getValue, invalidate, type SetValueOptions, setValue } from './values.js';
