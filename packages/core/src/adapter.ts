// `@stampede/core/adapter`: what an adapter author needs and an application does not. The main
// entry (`@stampede/core`) is the users' API; keeping these names out of it means an edge bundle of
// an application carries no Lua or Redis layout, and a change here is not a change to the user API.
//
// State is shared with the main entry: the counters and listeners that `reportBackendError` feeds
// live on `globalThis` (see shared.ts), so this entry and `@stampede/core` agree even when a bundler
// or Node loads them as separate files.

/** The `Cache` contract, importable from both entries. */
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
export { messageOf } from './errors.js';
export type { BackendErrorEvent, BackendOperation } from './events.js';
export { shouldReplace } from './never-older.js';
// The Redis-protocol layout shared by the ioredis and Upstash adapters (keys, tombstones, the Lua
// scripts, the server clock). It lives here for now and is meant to move to a package of its own for
// Redis-protocol bindings; adapters for other backends do not need any of it.
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
export { reportBackendError } from './stats.js';
