// The names each entry of @stampede/core exports at runtime (types are not listed: they vanish in
// the build). Shared by entry-points.test.ts (source) and dual-package.test.ts (the built package).

/** `@stampede/core` (both its `node` and its runtime-neutral build): the users' API. */
export const MAIN_ENTRY: readonly string[] = [
  'CACHE_BUS_ERROR_CODE',
  'CACHE_FILL_ERROR_CODE',
  'CacheBusError',
  'CacheFillError',
  'STAT_NAMES',
  'configure',
  'createTieredCache',
  'getOrCompute',
  'getOrComputeWith',
  'getValue',
  'inFlightCount',
  'invalidate',
  'invalidateTag',
  'invalidateTags',
  'isCacheBusError',
  'isCacheFillError',
  'jitteredTtl',
  'onStampedeEvent',
  'resetStats',
  'setValue',
  'stats',
  'statsByCache',
  'whenIdle',
];

/** `@stampede/core/adapter`: what adapter authors need. */
export const ADAPTER_ENTRY: readonly string[] = [
  // duration helpers
  'toMilliseconds',
  'toPositiveMilliseconds',
  // envelope and serializers
  'ENVELOPE_VERSION',
  'decodeEnvelope',
  'decodeTag',
  'encodeEnvelope',
  'encodeTag',
  'integerText',
  'jsonSerializer',
  'parseValue',
  'roundTripValue',
  'stringifyValue',
  'toSerializer',
  // entries of the fixed shapes the hit path is fast on
  'changeEntry',
  'createEntry',
  // the Cache methods' own argument checks
  'checkBusHandlers',
  'checkBusMessage',
  'checkCacheEntry',
  'checkCacheKey',
  'checkCacheSetOptions',
  'checkCacheWrite',
  'checkFillDoneArguments',
  'checkLockTtl',
  'checkTagList',
  // the never-older rule, errors and backend faults
  'checkKnownKeys',
  'kindOf',
  'messageOf',
  'reportBackendError',
  'reportWarning',
  'shouldReplace',
  // bounding a backend call in time
  'raceTimeout',
  // the runtime's request isolation (workerd)
  'runsIsolatedRequests',
  // the change count a synchronous adapter may keep
  'CHANGES',
];
