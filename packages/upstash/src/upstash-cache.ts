import {
  type Cache,
  type CacheBus,
  checkFillDoneArguments,
  type Duration,
  type FillAnnouncement,
  type FillOutcome,
  kindOf,
  runsIsolatedRequests,
  type SerializerOption,
} from '@stampede/core/adapter';
import {
  busChannel,
  createOperationRunner,
  createRedisProtocolCache,
  createRedisProtocolContext,
  defineFillLockMembers,
  type FillLockMembers,
  parseRedisProtocolOptions,
  type RedisProtocolCacheMembers,
  remoteKeys,
} from '@stampede/redis-protocol';
import { createUpstashBus } from './bus.js';
import { assertUpstashClient, protocolClient, type UpstashClient } from './client.js';
import { redactCommand, UpstashCacheError } from './errors.js';
import { listenForFillDone, onOneLine } from './push-wake-up.js';
import { type BusLivenessOptions, parseBusLiveness } from './stream-liveness.js';

/** Options of {@link createUpstashCache}. */
export interface UpstashCacheOptions {
  /**
   * The `@upstash/redis` client to use (`Redis` from `@upstash/redis`, `@upstash/redis/cloudflare`
   * or `@upstash/redis/fastly`), with `automaticDeserialization` on or off. You own it.
   */
  client: UpstashClient;
  /**
   * Put before every key name this cache writes; two caches with different prefixes never see each
   * other's entries. No line break (CR or LF) in it: Upstash's pub/sub is a line-based stream, and
   * the prefix's channels could not be heard (a `TypeError`).
   * @default 'stampede:'
   */
  prefix?: string | undefined;
  /** The cache's name in stats, events and metric labels. @default 'upstash' */
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
   * Longest wait for any one Upstash request (the client's own retries included); a request that
   * takes longer fails: a read is then a miss, a write or a lock attempt a reported fault, and the
   * fill runs locally.
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
   * Hands every write, delete and lock release to the platform so it finishes after the response
   * is sent. The core writes a fill's value (and releases the lock) after its callers have the
   * value; on Cloudflare Workers and Vercel's Edge runtime work left pending after the response is
   * cancelled, so pass the platform's global `waitUntil` there (`import { waitUntil } from
   * 'cloudflare:workers'`, or from `@vercel/functions`). Not needed on Node servers.
   * @default undefined
   */
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
  /**
   * Lock losers subscribe to the key's `:done` channel (the client's `subscribe`, server-sent events
   * over one HTTP request, `@upstash/redis` >= 1.35) and read the value as soon as the holder
   * announces it, instead of only polling. One subscription per waiting call, opened when it loses
   * the lock and closed when its wait ends (never shared across requests, as edge runtimes require).
   * On a metered plan a wait costs one more request (the subscribe). Without `subscribe` on the
   * client, or when the subscription fails, losers poll (`lockPollInterval`). Holders always
   * announce, whatever this option says.
   * @default true
   */
  pushWakeUp?: boolean | undefined;
  /**
   * A second `@upstash/redis` client (another database) that holds the fill locks and carries the
   * announcements of fills ending (SET NX of the lock, its release and extension, the PUBLISH, and
   * the push wake-up's subscriptions), while values stay on `client`. Give one for a database with
   * eviction off when the values' database has it on: an evicted lock lets a second replica fill the
   * same key. Every replica sharing the prefix must use the same lock database.
   * @default undefined (locks live on `client`)
   */
  lockClient?: UpstashClient | undefined;
  /**
   * The check that the invalidation bus's stream (see {@link UpstashCache.bus}) still delivers:
   * `@upstash/redis` never reports a stream that broke after it opened, so after a quiet `interval`
   * (stretched at random by up to a quarter) the subscriber publishes a ping on the bus channel and,
   * not hearing it within `timeout` of PUBLISH's answer, opens the stream again (and a tiered cache
   * clears its local copies). With the defaults an idle subscriber publishes one ping per 10 to
   * 12.5 s (up to 8,640 commands a day per replica, which Upstash bills; none while the bus carries
   * traffic, other replicas' pings included) and a broken stream is noticed within about 20 s.
   * `{ interval, timeout }` tunes both (durations of at least 1 ms; an idle subscriber then pings
   * once per 2 to 2.5 intervals, and a break is noticed within about 2.5 × `interval` +
   * `operationTimeout` + `timeout`). `false` turns the check off: no ping is ever sent, and a stream
   * broken silently is never opened again, so from then on a tiered cache misses other replicas'
   * evictions and its local copies live up to its `localTtl`. Nothing is checked on Cloudflare
   * Workers, where the bus does not listen.
   * @default true (`{ interval: 5000, timeout: 5000 }`, in ms)
   * @example
   * createUpstashCache({ client, busLiveness: { interval: '1m' } }); // one ping per 2 to 2.5 min when idle
   */
  busLiveness?: boolean | BusLivenessOptions | undefined;
}

/** A {@link Cache} on Upstash Redis over HTTP, with the distributed fill lock. */
export interface UpstashCache extends RedisProtocolCacheMembers<UpstashClient> {
  /**
   * Listens for the end of fills of `key` on any replica through its own subscription (a no-op with
   * `pushWakeUp: false` or a client without `subscribe`); calls `ready` once the server has
   * acknowledged it. The returned function closes the subscription. A commit's announcement carries
   * the stored text (up to 64 KiB), handed to the listener decoded as `announced`. Each waiting call
   * has its own subscription (a stream belongs to its request on workerd), so none lingers: a loser
   * always reads once on `ready`.
   */
  onFillDone(
    key: string,
    listener: (outcome: FillOutcome, announced?: FillAnnouncement) => void,
    ready?: () => void,
  ): () => void;
  /**
   * The invalidation bus of `createTieredCache`: PUBLISH on `<prefix>bus` (shared with ioredis and
   * node-redis caches on the same prefix), heard through `subscribe` (server-sent events, opened
   * again after an error, or once a ping it publishes after a quiet interval is not heard back: a
   * stream that broke after it opened), both on the lock client (the client unless `lockClient` is
   * given), where push wake-up listens too; `busLiveness` tunes or turns off the ping. `undefined`
   * for a client without `publish`. On Cloudflare Workers it publishes but neither listens nor pings
   * (a stream belongs to one request): there a tiered cache's local copies are bounded by its
   * `localTtl`.
   */
  readonly bus: CacheBus | undefined;
}

function checkOptions(options: UpstashCacheOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('options must be an object with a client from @upstash/redis');
  }
  assertUpstashClient(options.client);
  if (options.lockClient !== undefined) assertUpstashClient(options.lockClient, 'options.lockClient');
  if (options.waitUntil !== undefined && typeof options.waitUntil !== 'function') {
    throw new TypeError(`options.waitUntil must be a function; got ${kindOf(options.waitUntil)}`);
  }
  if (options.pushWakeUp !== undefined && typeof options.pushWakeUp !== 'boolean') {
    throw new TypeError(`options.pushWakeUp must be a boolean; got ${kindOf(options.pushWakeUp)}`);
  }
}

/**
 * A cache on Upstash Redis through `@upstash/redis` (HTTP, so it runs on serverless and edge
 * runtimes). Entries are stored as the versioned envelope (`s2|createdAt|freshUntil|staleUntil|delta|payload`, or `s1|...` without `delta`;
 * never valid JSON, so the client's `automaticDeserialization` hands it back untouched) with a
 * physical TTL of `ttl + grace` (with fail-safe `ttl + max(grace, maxStale)`); a fill's write never replaces a newer entry (a `setValue` replaces what is stored), and a delete leaves a short
 * tombstone so a fill that started before it cannot bring the value back. Times are stored on
 * Redis's clock (the cache measures its offset from this process's clock with `TIME`), so replicas
 * whose clocks disagree still order writes and deletes correctly. Implements the distributed fill
 * lock and push wake-up: a lock loser hears the holder's announcement over a subscription of its
 * own (server-sent events) and polls with the core's back-off meanwhile.
 *
 * @example
 * import { Redis } from '@upstash/redis';
 * const cache = createUpstashCache({ client: Redis.fromEnv() });
 * const count = await getOrComputeWith(cache, 'bookmark_count',
 *   { ttl: '30s', distributedFillLock: true }, () => countBookmarksInDb());
 */
export function createUpstashCache(options: UpstashCacheOptions): UpstashCache {
  checkOptions(options);
  const { client, waitUntil, pushWakeUp = true } = options;
  const lockClient = options.lockClient ?? client;
  const { prefix, name, serializer, operationTimeout, tombstoneTtl } = parseRedisProtocolOptions(
    options,
    'upstash',
    ['client', 'waitUntil', 'pushWakeUp', 'lockClient', 'busLiveness'],
  );
  const busLiveness = parseBusLiveness(options.busLiveness);
  if (!onOneLine(prefix)) {
    throw new TypeError(
      "options.prefix must not contain a line break (CR or LF): Upstash's pub/sub is a line-based stream, so the prefix's channels (push wake-up, the invalidation bus) could not be heard",
    );
  }
  const createError = (...args: ConstructorParameters<typeof UpstashCacheError>): UpstashCacheError =>
    new UpstashCacheError(...args);
  const operations = createOperationRunner({
    name,
    label: 'upstash',
    operationTimeout,
    createError,
    mapError: redactCommand,
    waitUntil,
  });
  const context = createRedisProtocolContext(
    protocolClient(client),
    prefix,
    operations,
    lockClient === client ? undefined : protocolClient(lockClient),
  );
  const cache = createRedisProtocolCache(context, { serializer, tombstoneTtl, createError });
  const decode = (message: unknown) => cache.decodeAnnouncement(message);
  // The first herd after a start should run like a warm one: the client's first request (loading
  // the runtime's fetch, opening its connection) goes out now, as the clock's first measurement.
  // Not on Cloudflare Workers, where a cache is made at global scope and I/O there is refused.
  if (!runsIsolatedRequests()) cache.prime();

  // The fill-lock members are added by defineFillLockMembers (accessors kept out of the literal).
  const upstashCache = {
    name,
    prefix,
    client,
    lockClient,
    get: (key) => cache.get(key),
    set: (key, entry, setOptions) => cache.set(key, entry, setOptions),
    delete: (key) => cache.delete(key),
    roundTrip: (value) => cache.roundTrip(value),
    invalidateTags: (tags) => cache.invalidateTags(tags),
    onFillDone(key, listener, ready) {
      checkFillDoneArguments(key, listener, ready);
      if (!pushWakeUp) return () => {};
      return listenForFillDone(lockClient, remoteKeys(prefix, key).channel, listener, ready, decode);
    },
    bus: createUpstashBus(lockClient, busChannel(prefix), operations, busLiveness),
  } satisfies Omit<UpstashCache, keyof FillLockMembers>;
  return defineFillLockMembers(upstashCache, cache);
}
