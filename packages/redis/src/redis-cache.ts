// Shutdown waits for the core's work on the cache: a user API, so from the main entry.
import { type WhenIdleOptions, whenIdle } from '@stampede/core';
import {
  type Cache,
  type CacheBus,
  checkBusHandlers,
  checkBusMessage,
  type Duration,
  type FillAnnouncement,
  type FillOutcome,
  kindOf,
  reportWarning,
  type SerializerOption,
} from '@stampede/core/adapter';
import {
  busChannel,
  createRedisProtocolCache,
  defineFillLockMembers,
  type FillLockMembers,
  parseRedisProtocolOptions,
  prefixPinsSlot,
  pushWakeUpMembers,
  type RedisProtocolCacheMembers,
} from '@stampede/redis-protocol';
import type { Cluster, Redis } from 'ioredis';
import { isCluster, keyPrefixOf, type RedisClient } from './client.js';
import { createContext } from './context.js';
import { RedisCacheError } from './errors.js';
import { createNotifier } from './notifier.js';

/** Options of {@link createRedisCache}. */
export interface RedisCacheOptions {
  /**
   * The ioredis client to use: a standalone `Redis` or a `Cluster`. You own it: `close()` never
   * closes it (only the subscriber connection the cache opened itself). A client made with ioredis's
   * `keyPrefix` works: Redis holds `keyPrefix + prefix + ...`, channels included, so the cache
   * shares keys and locks with a client without one whose `prefix` is the two together.
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
  /**
   * A second ioredis client (another Redis, or another database of one) that holds the fill locks
   * and carries the announcements of fills ending (SET NX of the lock, its release and extension,
   * the PUBLISH, and the subscriber, duplicated from this client), while values stay on `client`.
   * Give one whose server never evicts (`maxmemory-policy noeviction`) when the values' server may:
   * an evicted lock lets a second replica fill the same key. Tombstones and tags' records stay with
   * the values, where eviction can still undo a delete or a tag invalidation (see the README,
   * "Running Redis for stampede"). Every replica sharing the prefix must use the same lock server.
   * You own it, as you own `client`.
   * @default undefined (locks live on `client`)
   */
  lockClient?: Redis | Cluster | undefined;
}

/** A {@link Cache} on Redis or Redis Cluster, with the distributed fill lock and push wake-up. */
export interface RedisCache extends RedisProtocolCacheMembers<Redis | Cluster> {
  /**
   * Listens for the end of fills of `key` on any replica (a no-op with `pushWakeUp: false`); calls
   * `ready` once the SUBSCRIBE is acknowledged, so the waiter reads once a fill that ended meanwhile.
   * A holder's commit announces the stored text with the outcome (up to 64 KiB): the listener gets
   * it decoded as `announced`. The channel stays subscribed after its last listener leaves (up to
   * 1,000 channels, least recently used first out), so the key's next waiters hear at once.
   */
  onFillDone(
    key: string,
    listener: (outcome: FillOutcome, announced?: FillAnnouncement) => void,
    ready?: () => void,
  ): () => void;
  /** True when `key`'s channel is already subscribed and acknowledged (see `onFillDone`). */
  hearsFillDone(key: string): boolean;
  /**
   * The invalidation bus of `createTieredCache`: Redis pub/sub on the channel `<prefix>bus`,
   * published on the lock client (the client unless `lockClient` is given: pub/sub is per server, so
   * the bus lives where the subscriber does), heard on the cache's subscriber connection (the one
   * push wake-up uses). Every cache on the same prefix hears every message.
   */
  readonly bus: CacheBus;
  /**
   * Waits for this process's work on the cache (fills, background refreshes, their writes and lock
   * releases; see `whenIdle`) at most `options.timeout` (default `'5s'`), then closes the subscriber
   * connection the cache opened (never the client you passed). Call it before you close your client,
   * so that a value being filled is stored and the fleet's lock released instead of left to expire.
   *
   * @throws TypeError / RangeError (as a rejection) when `options.timeout` is not a duration
   */
  close(options?: WhenIdleOptions): Promise<void>;
}

function isIoredisClient(client: unknown): boolean {
  if (typeof client !== 'object' || client === null) return false;
  const candidate = client as Partial<Redis>;
  return typeof candidate.get === 'function' && typeof candidate.duplicate === 'function';
}

function checkOptions(options: RedisCacheOptions): void {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const { client, pushWakeUp, lockClient } = options;
  if (!isIoredisClient(client)) throw new TypeError('options.client must be an ioredis Redis or Cluster');
  if (lockClient !== undefined && !isIoredisClient(lockClient)) {
    throw new TypeError('options.lockClient must be an ioredis Redis or Cluster');
  }
  if (pushWakeUp !== undefined && typeof pushWakeUp !== 'boolean') {
    throw new TypeError(`options.pushWakeUp must be a boolean; got ${kindOf(options.pushWakeUp)}`);
  }
  if (lockClient !== undefined && keyPrefixOf(lockClient) !== keyPrefixOf(client)) {
    throw new RangeError(
      `options.lockClient must have the keyPrefix of options.client ('${keyPrefixOf(client)}'); got '${keyPrefixOf(lockClient)}'`,
    );
  }
}

/**
 * A cache on Redis or Redis Cluster through ioredis. Entries are stored as the versioned envelope
 * (`s2|createdAt|freshUntil|staleUntil|delta|payload`, or `s1|...` without the fill's `delta`) with a physical TTL of `ttl + grace` (PX, ms; with fail-safe `ttl + max(grace, maxStale)`); a
 * fill's write never replaces a newer entry (a `setValue` replaces what is stored), and a delete leaves a short tombstone so a fill that started
 * before it cannot bring the value back. Times are stored on Redis's clock (the cache measures its
 * offset from this process's clock with `TIME`), so replicas whose clocks disagree still order
 * writes and deletes correctly. Implements the distributed fill lock and push wake-up.
 *
 * Creating the cache starts its warm-up in the background (nothing to await, nothing thrown): the
 * scripts are loaded (`SCRIPT LOAD`), the server clock measured, the subscriber connected and the
 * eviction policies of the lock's and the values' servers read (one `warning` when they can evict a
 * lock, or a tombstone or a tag's record before the values it invalidates), so the
 * first herd after a deploy runs like a warm one. On a client made with `lazyConnect` (not connected
 * yet) the warm-up waits for the cache's first read or write instead.
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
  const lockClient = options.lockClient ?? client;
  const { prefix, name, serializer, operationTimeout, tombstoneTtl } = parseRedisProtocolOptions(
    options,
    'redis',
    ['client', 'pushWakeUp', 'lockClient'],
  );
  // With ioredis's `keyPrefix`, Redis holds `keyPrefix + prefix + ...`: the names the protocol works
  // with (channels and keys built inside scripts included), ioredis adding its part to keys itself.
  const remotePrefix = keyPrefixOf(client) + prefix;
  const context = createContext(client, name, remotePrefix, operationTimeout, lockClient);
  const cache = createRedisProtocolCache(context.protocol, {
    serializer,
    tombstoneTtl,
    createError: (code, message, details) => new RedisCacheError(code, message, details),
  });
  warnReplicaReads(client, name, remotePrefix);
  const notifier = createNotifier(context, (message) => cache.decodeAnnouncement(message));
  const channel = busChannel(remotePrefix);
  let warm = false;
  const warmUp = (): void => {
    warm = true;
    // A client the user already ended gets no commands (they would only fail) and no subscriber.
    if (client.status === 'end') return;
    void cache.warmUp();
    if (pushWakeUp) notifier.warm();
  };
  // A client made with `lazyConnect` connects on its first command: the cache warms up on its own
  // first use then, not as it is created.
  if (client.status !== 'wait') warmUp();

  // The fill-lock members are added by defineFillLockMembers (accessors kept out of the literal).
  const redisCache = {
    name,
    prefix,
    client,
    lockClient,
    get(key) {
      if (!warm) warmUp();
      return cache.get(key);
    },
    set(key, entry, setOptions) {
      if (!warm) warmUp();
      return cache.set(key, entry, setOptions);
    },
    delete(key) {
      if (!warm) warmUp();
      return cache.delete(key);
    },
    roundTrip: (value) => cache.roundTrip(value),
    invalidateTags(tags) {
      if (!warm) warmUp();
      return cache.invalidateTags(tags);
    },
    ...pushWakeUpMembers(pushWakeUp, notifier),
    bus: {
      async publish(message) {
        checkBusMessage(message);
        const receivers = await context.call('publish', undefined, () =>
          lockClient.publish(channel, message),
        );
        return typeof receivers === 'number' ? receivers : undefined;
      },
      subscribe(handlers) {
        checkBusHandlers(handlers);
        return notifier.subscribeBus(handlers);
      },
    },
    async close(options) {
      // Lock releases that failed on a fault and wait to be sent again are sent now, once, as their
      // last attempt: nothing of this cache runs after close() resolves.
      await context.protocol.releaseRetries.settle();
      await whenIdle(redisCache, options);
      await notifier.close();
    },
  } satisfies Omit<RedisCache, keyof FillLockMembers>;
  return defineFillLockMembers(redisCache, cache);
}

/**
 * A `Cluster` made with `scaleReads` other than `'master'` sends GETs to replicas, and in a Cluster
 * the cache reads entries (and tagged entries' tags) with GET, unless its prefix pins one slot: a
 * read may then be a replication lag
 * behind a write, a delete or a tag invalidation, which the cache's guarantees do not allow for.
 * One warning as the cache is made (scripts, the lock and writes still go to the primaries).
 */
function warnReplicaReads(client: RedisClient, name: string, prefix: string): void {
  // A prefix that pins one slot reads by script, which goes to the primary.
  if (!isCluster(client) || prefixPinsSlot(prefix)) return;
  const scaleReads = (client as { options?: { scaleReads?: unknown } }).options?.scaleReads;
  if (scaleReads === undefined || scaleReads === 'master') return;
  const how = typeof scaleReads === 'string' ? `'${scaleReads}'` : 'a function';
  reportWarning(
    name,
    `stampede: the Cluster client of cache '${name}' has scaleReads ${how}: it reads entries from replicas, ` +
      'so a read may be a replication lag behind a write, a delete or a tag invalidation (an invalidated value ' +
      "served for that long). Give the cache a Cluster client with scaleReads 'master' (the default), or a " +
      "prefix that pins one slot ('app{1}:'), which reads by script on the primaries.",
  );
}
