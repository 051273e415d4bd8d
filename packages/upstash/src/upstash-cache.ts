import {
  type Cache,
  type CacheEntry,
  type CacheSetOptions,
  createServerClock,
  type Duration,
  decodeStored,
  type FillLock,
  messageOf,
  pxArgument,
  remoteWriteArgs,
  roundTripValue,
  type SerializerOption,
  toPositiveMilliseconds,
  toSerializer,
  type WriteGuardArgs,
} from '@stampede/core/adapter';
import { assertUpstashClient, type UpstashClient } from './client.js';
import { UpstashCacheError } from './errors.js';
import { acquireFillLock } from './fill-lock.js';
import { upstashKeys } from './keys.js';
import { callUpstash, keepAlive, type OperationContext, report } from './operation.js';
import { DELETE_SCRIPT, runScript, TIME_SCRIPT, WRITE_SCRIPT } from './scripts.js';

/** Options of {@link createUpstashCache}. */
export interface UpstashCacheOptions {
  /**
   * The `@upstash/redis` client to use (`Redis` from `@upstash/redis`, `@upstash/redis/cloudflare`
   * or `@upstash/redis/fastly`), with `automaticDeserialization` on or off. You own it.
   */
  client: UpstashClient;
  /**
   * Put before every key name this cache writes; two caches with different prefixes never see each
   * other's entries.
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
}

/** A {@link Cache} on Upstash Redis over HTTP, with the distributed fill lock. */
export interface UpstashCache extends Cache {
  readonly name: string;
  /** The key prefix. */
  readonly prefix: string;
  /** The client given in the options. */
  readonly client: UpstashClient;
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
  tryAcquireFillLock(key: string, ttl: number): Promise<FillLock | undefined>;
  /** `value` through the serializer and back: what a later `get` returns for it. */
  roundTrip(value: unknown): unknown;
}

function checkOptions(options: UpstashCacheOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('options must be an object with a client from @upstash/redis');
  }
  assertUpstashClient(options.client);
  const { prefix, name, serializer } = options;
  if (prefix !== undefined && typeof prefix !== 'string') {
    throw new TypeError(`options.prefix must be a string; got ${typeof prefix}`);
  }
  if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
    throw new TypeError('options.name must be a non-empty string');
  }
  if (options.waitUntil !== undefined && typeof options.waitUntil !== 'function') {
    throw new TypeError(`options.waitUntil must be a function; got ${typeof options.waitUntil}`);
  }
  toSerializer(serializer, 'options.serializer');
}

/**
 * A cache on Upstash Redis through `@upstash/redis` (HTTP, so it runs on serverless and edge
 * runtimes). Entries are stored as the versioned envelope (`s1|createdAt|freshUntil|staleUntil|payload`,
 * never valid JSON, so the client's `automaticDeserialization` hands it back untouched) with a
 * physical TTL of `ttl + grace`; a write never replaces a newer entry, and a delete leaves a short
 * tombstone so a fill that started before it cannot bring the value back. Times are stored on
 * Redis's clock (the cache measures its offset from this process's clock with `TIME`), so replicas
 * whose clocks disagree still order writes and deletes correctly. Implements the distributed fill
 * lock; lock losers poll with the core's back-off.
 *
 * @example
 * import { Redis } from '@upstash/redis';
 * const cache = createUpstashCache({ client: Redis.fromEnv() });
 * const count = await getOrComputeWith(cache, 'bookmark_count',
 *   { ttl: '30s', distributedFillLock: true }, () => countBookmarksInDb());
 */
export function createUpstashCache(options: UpstashCacheOptions): UpstashCache {
  checkOptions(options);
  const { client, prefix = 'stampede:', name = 'upstash' } = options;
  const serializer = toSerializer(options.serializer, 'options.serializer');
  const operationTimeout =
    options.operationTimeout === undefined
      ? 1_000
      : toPositiveMilliseconds(options.operationTimeout, 'options.operationTimeout');
  const tombstoneTtl =
    options.tombstoneTtl === undefined
      ? 10_000
      : toPositiveMilliseconds(options.tombstoneTtl, 'options.tombstoneTtl');
  const context: OperationContext = { name, operationTimeout, waitUntil: options.waitUntil };
  // Measured on first use and refreshed by later calls; never on a hit's critical path once known.
  const clock = createServerClock(() =>
    callUpstash(context, 'time', undefined, () => runScript(client, TIME_SCRIPT, [], [])),
  );

  return {
    name,
    prefix,
    client,
    async get(key) {
      // Started before the GET so that, on first use, both travel together.
      const offset = clock.current();
      const stored = await callUpstash(context, 'get', key, () =>
        client.get<unknown>(upstashKeys(prefix, key).value),
      );
      try {
        return decodeStored(stored, serializer, await offset);
      } catch (cause) {
        const error = new UpstashCacheError(
          'STAMPEDE_UPSTASH_DECODE',
          `cannot decode the entry of '${key}' (read as a miss): ${messageOf(cause)}`,
          { key, cause },
        );
        report(context, 'decode', key, error);
        return undefined;
      }
    },
    async set(key, entry, { ttl, direct }) {
      const offset = await clock.current();
      let args: WriteGuardArgs;
      try {
        args = remoteWriteArgs(entry, ttl, { serializer, offset, tombstoneTtl, direct });
      } catch (cause) {
        throw new UpstashCacheError(
          'STAMPEDE_UPSTASH_ENCODE',
          `cannot serialise the value of '${key}' (not stored): ${messageOf(cause)}`,
          { key, cause },
        );
      }
      const { text, createdAt, px } = args;
      await keepAlive(
        context,
        callUpstash(context, 'set', key, () =>
          runScript(
            client,
            WRITE_SCRIPT,
            [upstashKeys(prefix, key).value],
            [text, createdAt, px, args.direct ?? ''],
          ),
        ),
      );
    },
    async delete(key) {
      await keepAlive(
        context,
        callUpstash(context, 'delete', key, () =>
          runScript(client, DELETE_SCRIPT, [upstashKeys(prefix, key).value], [pxArgument(tombstoneTtl)]),
        ),
      );
    },
    roundTrip(value) {
      return roundTripValue(value, serializer);
    },
    tryAcquireFillLock(key, ttl) {
      return acquireFillLock(client, context, prefix, key, ttl);
    },
  };
}
