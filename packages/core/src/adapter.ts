// `@stampede/core/adapter`: what an adapter author needs and an application does not. The main
// entry (`@stampede/core`) is the users' API; keeping these names out of it means an edge bundle of
// an application carries no adapter plumbing, and a change here is not a change to the user API.
//
// State is shared with the main entry: the counters and listeners that `reportBackendError` feeds
// live on `globalThis` (see shared.ts), so this entry and `@stampede/core` agree even when a bundler
// or Node loads them as separate files.

/** The `Cache` contract, importable from both entries. */
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
// The argument checks of a `Cache`'s own methods (key, entry, set options, tags, lock TTL), so that
// every adapter refuses a bad direct call with the same message before it reads or writes anything.
export {
  checkBusHandlers,
  checkBusMessage,
  checkCacheEntry,
  checkCacheKey,
  checkCacheSetOptions,
  checkCacheWrite,
  checkFillDoneArguments,
  checkLockTtl,
  checkTagList,
} from './cache-arguments.js';
export { type Duration, type DurationUnit, toMilliseconds, toPositiveMilliseconds } from './duration.js';
export { changeEntry, createEntry, type EntryChanges } from './entry.js';
export {
  decodeEnvelope,
  decodeTag,
  ENVELOPE_VERSION,
  type Envelope,
  encodeEnvelope,
  encodeTag,
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
export { checkKnownKeys, kindOf, messageOf } from './errors.js';
export type { BackendErrorEvent, BackendOperation } from './events.js';
export { shouldReplace } from './never-older.js';
// The Redis-protocol layout (keys, tombstones, the Lua scripts, the server clock) lives in
// @stampede/redis-protocol: adapters for other backends need none of it.
export { raceTimeout } from './race-timeout.js';
// The change count a synchronous adapter may keep (see `CHANGES_KEY`).
// The runtime's request isolation (workerd), for adapters that hold streams or connections.
export { CHANGES_KEY as CHANGES, runsIsolatedRequests } from './shared.js';
export { reportBackendError, reportWarning } from './stats.js';
