import type { Cache, CacheEntry, CacheSetOptions, FillLock, FillLockAttempt } from '@stampede/core/adapter';

/**
 * What the caches of every Redis-protocol binding (`@stampede/redis`, `@stampede/node-redis`,
 * `@stampede/upstash`) offer alike, with `Client` the binding's client type. Each binding's cache
 * type extends it with its push wake-up, bus and lifetime members.
 */
export interface RedisProtocolCacheMembers<Client> extends Cache {
  readonly name: string;
  /** The key prefix. */
  readonly prefix: string;
  /** The client given in the options. */
  readonly client: Client;
  /** Where the fill locks live: the `lockClient` given in the options, else `client`. */
  readonly lockClient: Client;
  /**
   * The entry for `key`, its times on this process's clock; a tombstone, an expired or an
   * undecodable entry is `undefined`.
   */
  get(key: string): Promise<CacheEntry | undefined>;
  /**
   * Writes `entry` with `PX ttl`, unless a newer entry or a newer tombstone is there (Lua script).
   * An entry that would read as a miss at once (`ttl` 0, or already past its `staleUntil`) removes
   * what is stored instead, leaving a tombstone. A `ttl` beyond `PX`'s range is stored without one.
   * Resolves `false` when it refused the write.
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<boolean>;
  /**
   * Replaces the entry with a tombstone holding Redis's own time, kept `tombstoneTtl` ms (so fills
   * that started earlier, on any replica, cannot write).
   */
  delete(key: string): Promise<void>;
  /** `value` through the serializer and back: what a later `get` returns for it. */
  roundTrip(value: unknown): unknown;
  /**
   * `SET NX PX` with a random token (on the lock client); `undefined` when another holder has the
   * lock. The capability itself is `undefined` once Redis has refused a script (an ACL user without
   * EVAL/EVALSHA, warned about once): a lock that could never be released would make every herd
   * wait out `lockWaitTimeout`, so the core protects in-process only instead.
   */
  readonly tryAcquireFillLock?: ((key: string, ttl: number) => Promise<FillLock | undefined>) | undefined;
  /**
   * The lock attempt and the read of the entry in one round trip: one Lua script (`SET NX PX` and a
   * tag-checked `GET`) where the lock lives with the values, else `SET NX PX` on the lock client and
   * the read in parallel. A granted lock then needs no double-check read, and its `commit` writes,
   * releases and announces in one script (not with a separate `lockClient`). `undefined` when
   * `tryAcquireFillLock` is.
   */
  readonly tryAcquireFillLockAndRead?: ((key: string, ttl: number) => Promise<FillLockAttempt>) | undefined;
  /**
   * Records Redis's time as each tag's invalidation time (one small key per tag, `<prefix>{tag}:tag`,
   * kept without expiry): entries carrying the tag created before it read as misses on every
   * replica. A tagged hit still costs one round trip (a Lua script reads the entry and its tags).
   */
  invalidateTags(tags: readonly string[]): Promise<void>;
}
