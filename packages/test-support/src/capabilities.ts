/**
 * What the conformance suite checks on a Redis-protocol cache (`@stampede/redis` standalone and
 * Cluster, `@stampede/node-redis`, `@stampede/upstash`): all of them offer the lock with extension,
 * push wake-up, values round-tripped through a serializer, tags, the invalidation bus, the lock
 * attempt that reads and the commit, and each refuses bad arguments; none answers synchronously. Their times are stored on Redis's
 * clock through an estimate of the offset (`serverClock`).
 */
export const REDIS_PROTOCOL_CAPABILITIES = {
  lock: true,
  extend: true,
  push: true,
  sync: false,
  roundTrip: true,
  tags: true,
  bus: true,
  lockAndRead: true,
  commit: true,
  serverClock: true,
  checksArguments: true,
} as const;

/**
 * The same for a tiered cache in front of one of them: the lock, push wake-up and round trip are
 * the remote's; the bus is consumed, not offered.
 */
export const TIERED_ON_REDIS_PROTOCOL_CAPABILITIES = { ...REDIS_PROTOCOL_CAPABILITIES, bus: false } as const;
