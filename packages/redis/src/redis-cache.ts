import type {
  Cache,
  CacheEntry,
  CacheSetOptions,
  Duration,
  FillLock,
  FillOutcome,
  SerializerOption,
} from '@stampede/core/adapter';
import { createRedisProtocolCache, parseRedisProtocolOptions } from '@stampede/redis-protocol';
import type { Cluster, Redis } from 'ioredis';
import { createContext } from './context.js';
import { RedisCacheError } from './errors.js';
import { createNotifier } from './notifier.js';

/** Options of {@link createRedisCache}. */
export interface RedisCacheOptions {
  /**
   * The ioredis client to use: a standalone `Redis` or a `Cluster`. You own it: `close()` never
   * closes it (only the subscriber connection the cache opened itself).
   */
  client: Redis | Cluster;
  /**
   * Put before every key name this cache writes; two caches with different prefixes never see each
   * other's entries.
   * @default 'stampede:'
   */
  prefix?: string | undefined;
  /** The cache's name in stats, events and metric labels. @default 'redis' */
  name?: string | undefined;
  /**
   * Turns values into text and back: any `{ stringify, parse }` object, so `JSON`, `superjson` and
   * `devalue` plug in as they are (`serializer: superjson` keeps Dates, Maps, Sets and BigInts,
   * which JSON does not). The first release's `{ serialize, deserialize }` shape is still accepted.
   * The callers of a fill get its value through the serializer and back, as later hits will.
   * @default JSON (JSON.stringify / JSON.parse)
   */
  serializer?: SerializerOption | undefined;
  /**
   * Longest wait for any one Redis call; a call that takes longer fails (a read is then a miss, a
   * write or a lock attempt a reported fault, and the fill runs locally).
   * @default 1000 (ms)
   */
  operationTimeout?: Duration | undefined;
  /**
   * How long a delete's tombstone is kept. While it is, a fill that started before the delete cannot
   * write its (older) value, on any replica. Raise it if your fills can run longer.
   * @default 10000 (ms)
   */
  tombstoneTtl?: Duration | undefined;
  /**
   * Lock losers listen on Redis pub/sub (one shared subscriber connection per cache, opened on first
   * use) and fetch the value as soon as the holder announces it; polling stays as the fallback.
   * Holders always announce, whatever this option says.
   * @default true
   */
  pushWakeUp?: boolean | undefined;
}

/** A {@link Cache} on Redis or Redis Cluster, with the distributed fill lock and push wake-up. */
export interface RedisCache extends Cache {
  readonly name: string;
  /** The key prefix. */
  readonly prefix: string;
  /** The client given in the options. */
  readonly client: Redis | Cluster;
  /**
   * The entry for `key`, its times on this process's clock; a tombstone, an expired or an
   * undecodable entry is `undefined`.
   */
  get(key: string): Promise<CacheEntry | undefined>;
  /**
   * Writes `entry` with `PX ttl`, unless a newer entry or a newer tombstone is there (Lua script).
   * An entry that would read as a miss at once (`ttl` 0, or already past its `staleUntil`) removes
   * what is stored instead, leaving a tombstone. A `ttl` beyond `PX`'s range is stored without one.
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<void>;
  /**
   * Replaces the entry with a tombstone holding Redis's own time, kept `tombstoneTtl` ms (so fills
   * that started earlier, on any replica, cannot write).
   */
  delete(key: string): Promise<void>;
  /** `value` through the serializer and back: what a later `get` returns for it. */
  roundTrip(value: unknown): unknown;
  /** `SET NX PX` with a random token; `undefined` when another holder has the lock. */
  tryAcquireFillLock(key: string, ttl: number): Promise<FillLock | undefined>;
  /**
   * Records Redis's time as each tag's invalidation time (one small key per tag, `<prefix>{tag}:tag`,
   * kept without expiry): entries carrying the tag created before it read as misses on every
   * replica. A tagged hit still costs one round trip (a Lua script reads the entry and its tags).
   */
  invalidateTags(tags: readonly string[]): Promise<void>;
  /**
   * Listens for the end of fills of `key` on any replica (a no-op with `pushWakeUp: false`); calls
   * `ready` once the SUBSCRIBE is acknowledged, so the waiter reads once a fill that ended meanwhile.
   */
  onFillDone(key: string, listener: (outcome: FillOutcome) => void, ready?: () => void): () => void;
  /** Closes the subscriber connection the cache opened (never the client you passed). */
  close(): Promise<void>;
}

function checkOptions(options: RedisCacheOptions): void {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const { client, pushWakeUp } = options;
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.get !== 'function' ||
    typeof client.duplicate !== 'function'
  ) {
    throw new TypeError('options.client must be an ioredis Redis or Cluster');
  }
  if (pushWakeUp !== undefined && typeof pushWakeUp !== 'boolean') {
    throw new TypeError('options.pushWakeUp must be a boolean');
  }
}

/**
 * A cache on Redis or Redis Cluster through ioredis. Entries are stored as the versioned envelope
 * (`s1|createdAt|freshUntil|staleUntil|payload`) with a physical TTL of `ttl + grace` (PX, ms); a
 * write never replaces a newer entry, and a delete leaves a short tombstone so a fill that started
 * before it cannot bring the value back. Times are stored on Redis's clock (the cache measures its
 * offset from this process's clock with `TIME`), so replicas whose clocks disagree still order
 * writes and deletes correctly. Implements the distributed fill lock and push wake-up.
 *
 * @example
 * import { Redis } from 'ioredis';
 * const cache = createRedisCache({ client: new Redis(process.env.REDIS_URL) });
 * const count = await getOrComputeWith(cache, 'bookmark_count',
 *   { ttl: '30s', distributedFillLock: true }, () => countBookmarksInDb());
 */
export function createRedisCache(options: RedisCacheOptions): RedisCache {
  checkOptions(options);
  const { client, pushWakeUp = true } = options;
  const { prefix, name, serializer, operationTimeout, tombstoneTtl } = parseRedisProtocolOptions(
    options,
    'redis',
  );
  const context = createContext(client, name, prefix, operationTimeout);
  const notifier = createNotifier(context);
  const cache = createRedisProtocolCache(context.protocol, {
    serializer,
    tombstoneTtl,
    createError: (code, message, details) => new RedisCacheError(code, message, details),
  });

  return {
    name,
    prefix,
    client,
    get: (key) => cache.get(key),
    set: (key, entry, setOptions) => cache.set(key, entry, setOptions),
    delete: (key) => cache.delete(key),
    roundTrip: (value) => cache.roundTrip(value),
    tryAcquireFillLock: (key, ttl) => cache.tryAcquireFillLock(key, ttl),
    invalidateTags: (tags) => cache.invalidateTags(tags),
    onFillDone(key, listener, ready) {
      return pushWakeUp ? notifier.listen(key, listener, ready) : () => {};
    },
    close() {
      return notifier.close();
    },
  };
}
