// Shutdown waits for the core's work on the cache: a user API, so from the main entry.
import { type WhenIdleOptions, whenIdle } from '@stampede/core';
import type {
  Cache,
  CacheBus,
  Duration,
  FillAnnouncement,
  FillOutcome,
  SerializerOption,
} from '@stampede/core/adapter';
import { checkBusHandlers, checkBusMessage, kindOf } from '@stampede/core/adapter';
import {
  busChannel,
  createOperationRunner,
  createRedisProtocolCache,
  createRedisProtocolContext,
  defineFillLockMembers,
  type FillLockMembers,
  parseRedisProtocolOptions,
  pushWakeUpMembers,
  type RedisProtocolCacheMembers,
} from '@stampede/redis-protocol';
import { type NodeRedisClient, protocolClient } from './client.js';
import { NodeRedisCacheError } from './errors.js';
import { createNotifier } from './notifier.js';

/** Options of {@link createNodeRedisCache}. */
export interface NodeRedisCacheOptions {
  /**
   * The node-redis client to use (`createClient()` of the `redis` package; a `createCluster()` client
   * is a `TypeError`: use `@stampede/redis` with an ioredis `Cluster`), already connected
   * (`await client.connect()`). You own it: `close()` never closes it (only the subscriber
   * connection the cache opened itself).
   */
  client: NodeRedisClient;
  /**
   * Put before every key name this cache writes; two caches with different prefixes never see each
   * other's entries. Caches of `@stampede/redis` and `@stampede/upstash` with the same prefix share
   * entries, tombstones, the lock and its announcements with this one.
   * @default 'stampede:'
   */
  prefix?: string | undefined;
  /** The cache's name in stats, events and metric labels. @default 'node-redis' */
  name?: string | undefined;
  /**
   * Turns values into text and back: any `{ stringify, parse }` object (`JSON`, `superjson`,
   * `devalue`); the first release's `{ serialize, deserialize }` shape is still accepted.
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
   * use with `client.duplicate()`) and fetch the value as soon as the holder announces it; polling
   * stays as the fallback. Holders always announce, whatever this option says.
   * @default true
   */
  pushWakeUp?: boolean | undefined;
  /**
   * A second node-redis client, already connected (another Redis, or another database of one), that
   * holds the fill locks and carries the announcements of fills ending (SET NX of the lock, its
   * release and extension, the PUBLISH, and the subscriber, duplicated from this client), while
   * values stay on `client`. Give one whose server never evicts (`maxmemory-policy noeviction`) when
   * the values' server may. Every replica sharing the prefix must use the same lock server. You own it.
   * @default undefined (locks live on `client`)
   */
  lockClient?: NodeRedisClient | undefined;
}

/** A {@link Cache} on Redis through node-redis, with the distributed fill lock and push wake-up. */
export interface NodeRedisCache extends RedisProtocolCacheMembers<NodeRedisClient> {
  /**
   * Listens for the end of fills of `key` on any replica (a no-op with `pushWakeUp: false`); calls
   * `ready` once the SUBSCRIBE is acknowledged. A commit's announcement carries the stored text (up
   * to 64 KiB), handed to the listener decoded as `announced`. The channel stays subscribed after
   * its last listener leaves (up to 1,000 channels, least recently used first out).
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
   * push wake-up uses).
   * It reaches caches of every binding (ioredis, node-redis, Upstash) on the same prefix.
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

function isNodeRedisClient(client: unknown): boolean {
  if (typeof client !== 'object' || client === null) return false;
  const candidate = client as Partial<NodeRedisClient>;
  return typeof candidate.evalSha === 'function' && typeof candidate.duplicate === 'function';
}

/**
 * A `createCluster()` client: it has the commands of a client, but a script's keys are not all in
 * one slot here (a tagged entry's tags), and its pub/sub is per node: nothing tagged would be
 * stored, each write and read a fault.
 */
function isNodeRedisCluster(client: unknown): boolean {
  if (typeof client !== 'object' || client === null) return false;
  const candidate = client as { getSlotMaster?: unknown; nodeClient?: unknown };
  return typeof candidate.getSlotMaster === 'function' || typeof candidate.nodeClient === 'function';
}

function checkOptions(options: NodeRedisCacheOptions): void {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const { client, pushWakeUp, lockClient } = options;
  if (!isNodeRedisClient(client)) {
    throw new TypeError('options.client must be a node-redis client (createClient() of `redis`)');
  }
  for (const [option, given] of [
    ['client', client],
    ['lockClient', lockClient],
  ] as const) {
    if (isNodeRedisCluster(given)) {
      throw new TypeError(
        `options.${option} is a node-redis cluster (createCluster()): this binding is for one Redis (createClient()); for Redis Cluster use @stampede/redis with an ioredis Cluster`,
      );
    }
  }
  if (lockClient !== undefined && !isNodeRedisClient(lockClient)) {
    throw new TypeError('options.lockClient must be a node-redis client (createClient() of `redis`)');
  }
  if (pushWakeUp !== undefined && typeof pushWakeUp !== 'boolean') {
    throw new TypeError(`options.pushWakeUp must be a boolean; got ${kindOf(options.pushWakeUp)}`);
  }
}

/**
 * A cache on Redis through node-redis 6, with the layout, scripts and lock of
 * `@stampede/redis-protocol`: the same entries, tombstones and lock as `@stampede/redis` (ioredis)
 * and `@stampede/upstash` under the same prefix. Connect the client yourself first.
 *
 * Creating the cache starts its warm-up in the background (nothing to await, nothing thrown): the
 * scripts are loaded, the server clock measured, the subscriber connected and the eviction policies
 * of the lock's and the values' servers read (one `warning` when they can evict a lock, or a
 * tombstone or a tag's record before the values it invalidates).
 *
 * @example
 * import { createClient } from 'redis';
 * const client = createClient({ url: process.env.REDIS_URL });
 * await client.connect();
 * const cache = createNodeRedisCache({ client });
 */
export function createNodeRedisCache(options: NodeRedisCacheOptions): NodeRedisCache {
  checkOptions(options);
  const { client, pushWakeUp = true } = options;
  const lockClient = options.lockClient ?? client;
  const parsed = parseRedisProtocolOptions(options, 'node-redis', ['client', 'pushWakeUp', 'lockClient']);
  const { prefix, name } = parsed;
  const createError = (...args: ConstructorParameters<typeof NodeRedisCacheError>) =>
    new NodeRedisCacheError(...args);
  const operations = createOperationRunner({
    name,
    label: 'redis',
    operationTimeout: parsed.operationTimeout,
    createError,
  });
  const context = createRedisProtocolContext(
    protocolClient(client),
    prefix,
    operations,
    lockClient === client ? undefined : protocolClient(lockClient),
  );
  const cache = createRedisProtocolCache(context, {
    serializer: parsed.serializer,
    tombstoneTtl: parsed.tombstoneTtl,
    createError,
  });
  const notifier = createNotifier(lockClient, prefix, operations, (message) =>
    cache.decodeAnnouncement(message),
  );
  // A closed client gets no commands (they would only fail) and no subscriber.
  if (client.isOpen) {
    void cache.warmUp();
    if (pushWakeUp) notifier.warm();
  }
  const channel = busChannel(prefix);

  // The fill-lock members are added by defineFillLockMembers (accessors kept out of the literal).
  const nodeRedisCache = {
    name,
    prefix,
    client,
    lockClient,
    get: (key) => cache.get(key),
    set: (key, entry, setOptions) => cache.set(key, entry, setOptions),
    delete: (key) => cache.delete(key),
    roundTrip: (value) => cache.roundTrip(value),
    invalidateTags: (tags) => cache.invalidateTags(tags),
    ...pushWakeUpMembers(pushWakeUp, notifier),
    bus: {
      async publish(message) {
        checkBusMessage(message);
        const receivers = await operations.call('publish', undefined, () =>
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
      await context.releaseRetries.settle();
      await whenIdle(nodeRedisCache, options);
      notifier.close();
    },
  } satisfies Omit<NodeRedisCache, keyof FillLockMembers>;
  return defineFillLockMembers(nodeRedisCache, cache);
}
