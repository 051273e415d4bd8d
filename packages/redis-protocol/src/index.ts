export {
  type AuxiliaryCommand,
  type ChannelRefusalWatch,
  createChannelRefusalWatch,
  createServerAccess,
  isAuxiliaryRefusal,
  isPermissionError,
  isScriptingUnavailable,
  type ServerAccess,
} from './access.js';
export {
  createRedisProtocolCache,
  type RedisProtocolCache,
  type RedisProtocolCacheSettings,
} from './cache.js';
export { callSafely } from './call-safely.js';
export type { RedisProtocolClient } from './client.js';
export { type EndingClient, onClientEnd } from './client-end.js';
export { createRedisProtocolContext, type RedisProtocolContext } from './context.js';
export {
  hasRedisProtocolErrorShape,
  isRedisProtocolError,
  isRedisProtocolErrorOf,
  REDIS_PROTOCOL_ERROR_CODE_PREFIX,
  RedisProtocolError,
  type RedisProtocolErrorCode,
  type RedisProtocolErrorFactory,
  type RedisProtocolErrorOptions,
  redactServerEcho,
  replaceMessage,
} from './errors.js';
export { checkEvictionPolicy, evictionRisk } from './eviction.js';
export {
  type AnnouncementDecoder,
  createFillChannels,
  type FillChannels,
  type FillChannelsConnection,
  type FillListener,
  LINGERING_CHANNELS,
  type PushWakeUpNotifier,
  pushWakeUpMembers,
} from './fill-channels.js';
export {
  acquireFillLock,
  acquireFillLockAndRead,
  type FillLockWriter,
  fillLockHandle,
  type LockAndRead,
} from './fill-lock.js';
export {
  ANNOUNCED_PREFIX,
  ANNOUNCED_VALUE_LIMIT,
  busChannel,
  COMMIT_LUA,
  checkRemotePrefix,
  createServerClock,
  DELETE_LUA,
  decodeStored,
  EXTEND_LOCK_LUA,
  INVALIDATE_TAGS_LUA,
  LOCK_AND_READ_LUA,
  MAX_PX,
  NO_WRITES,
  prefixPinsSlot,
  pxArgument,
  RELEASE_LOCK_LUA,
  type RemoteKeys,
  type RemoteWriteOptions,
  remoteKeys,
  remoteWriteArgs,
  SERVER_TIME_LUA,
  type ServerClock,
  type ServerClockOptions,
  TAGGED_GET_LUA,
  TOMBSTONE_PREFIX,
  tagKey,
  tagStampKey,
  tombstone,
  WRITE_GUARD_LUA,
  type WriteGuardArgs,
  writeGuardArgs,
} from './layout.js';
export { defineFillLockMembers, type FillLockMembers } from './lock-members.js';
export {
  createOperationRunner,
  isMovedReply,
  isSubscriberModeError,
  type OperationRunner,
  type OperationRunnerOptions,
} from './operation.js';
export {
  DEFAULT_OPERATION_TIMEOUT,
  DEFAULT_PREFIX,
  DEFAULT_TOMBSTONE_TTL,
  type ParsedRedisProtocolOptions,
  parseRedisProtocolOptions,
  type RedisProtocolOptions,
} from './options.js';
export {
  createRefusedWriteWatch,
  createUndecodableWatch,
  isServerRefusal,
  REFUSED_WRITE_STREAK,
  type RefusedWriteWatch,
  UNDECODABLE_STREAK,
  type UndecodableWatch,
} from './refused-writes.js';
export type { ReleaseRetries } from './release-retry.js';
export type { RedisProtocolCacheMembers } from './remote-cache.js';
export {
  COMMIT_SCRIPT,
  createScriptRunner,
  DELETE_SCRIPT,
  EXTEND_SCRIPT,
  GET_SCRIPT,
  GET_SCRIPT_WITHOUT_FLAGS,
  INVALIDATE_TAGS_SCRIPT,
  LOCK_AND_READ_SCRIPT,
  type LuaScript,
  RELEASE_SCRIPT,
  type ScriptRunner,
  TIME_SCRIPT,
  WRITE_SCRIPT,
} from './scripts.js';
export { createSlowReadWatch, SLOW_READ_STREAK, type SlowReadWatch } from './slow-reads.js';
export { randomToken } from './web-crypto.js';
