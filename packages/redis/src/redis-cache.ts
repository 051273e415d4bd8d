import {
  type Cache,
  type CacheEntry,
  type CacheSetOptions,
  type Duration,
  decodeStored,
  type FillLock,
  type FillOutcome,
  jsonSerializer,
  messageOf,
  type Serializer,
  tombstone,
  toPositiveMilliseconds,
  type WriteGuardArgs,
  writeGuardArgs,
} from '@stampede/core';
import type { Cluster, Redis } from 'ioredis';
import { createContext } from './context.js';
import { RedisCacheError } from './errors.js';
import { acquireFillLock } from './fill-lock.js';
import { checkPrefix, redisKeys } from './keys.js';
import { createNotifier } from './notifier.js';
import { runScript, WRITE_SCRIPT } from './scripts.js';

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
  /** Turns values into text and back. @default jsonSerializer (JSON.stringify / JSON.parse) */
  serializer?: Serializer | undefined;
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
  /** The entry for `key`; a tombstone, an expired or an undecodable entry is `undefined`. */
  get(key: string): Promise<CacheEntry | undefined>;
  /** Writes `entry` with `PX ttl`, unless a newer entry or a newer tombstone is there (Lua script). */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<void>;
  /** Replaces the entry with a tombstone kept `tombstoneTtl` ms (so older fills cannot write). */
  delete(key: string): Promise<void>;
  /** `SET NX PX` with a random token; `undefined` when another holder has the lock. */
  tryAcquireFillLock(key: string, ttl: number): Promise<FillLock | undefined>;
  /** Listens for the end of fills of `key` on any replica (a no-op with `pushWakeUp: false`). */
  onFillDone(key: string, listener: (outcome: FillOutcome) => void): () => void;
  /** Closes the subscriber connection the cache opened (never the client you passed). */
  close(): Promise<void>;
}

function checkOptions(options: RedisCacheOptions): void {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const { client, prefix, name, serializer, pushWakeUp } = options;
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.get !== 'function' ||
    typeof client.duplicate !== 'function'
  ) {
    throw new TypeError('options.client must be an ioredis Redis or Cluster');
  }
  if (prefix !== undefined) {
    if (typeof prefix !== 'string') throw new TypeError('options.prefix must be a string');
    checkPrefix(prefix);
  }
  if (name !== undefined && (typeof name !== 'string' || name.length === 0)) {
    throw new TypeError('options.name must be a non-empty string');
  }
  if (
    serializer !== undefined &&
    (typeof serializer?.serialize !== 'function' || typeof serializer.deserialize !== 'function')
  ) {
    throw new TypeError('options.serializer must have serialize and deserialize functions');
  }
  if (pushWakeUp !== undefined && typeof pushWakeUp !== 'boolean') {
    throw new TypeError('options.pushWakeUp must be a boolean');
  }
}

/**
 * A cache on Redis or Redis Cluster through ioredis. Entries are stored as the versioned envelope
 * (`s1|createdAt|freshUntil|staleUntil|payload`) with a physical TTL of `ttl + grace` (PX, ms); a
 * write never replaces a newer entry, and a delete leaves a short tombstone so a fill that started
 * before it cannot bring the value back. Implements the distributed fill lock and push wake-up.
 *
 * @example
 * import { Redis } from 'ioredis';
 * const cache = createRedisCache({ client: new Redis(process.env.REDIS_URL) });
 * const count = await getOrComputeWith(cache, 'bookmark_count',
 *   { ttl: '30s', distributedFillLock: true }, () => countBookmarksInDb());
 */
export function createRedisCache(options: RedisCacheOptions): RedisCache {
  checkOptions(options);
  const {
    client,
    prefix = 'stampede:',
    name = 'redis',
    serializer = jsonSerializer,
    pushWakeUp = true,
  } = options;
  const operationTimeout =
    options.operationTimeout === undefined
      ? 1_000
      : toPositiveMilliseconds(options.operationTimeout, 'options.operationTimeout');
  const tombstoneTtl =
    options.tombstoneTtl === undefined
      ? 10_000
      : toPositiveMilliseconds(options.tombstoneTtl, 'options.tombstoneTtl');
  const context = createContext(client, name, prefix, operationTimeout);
  const notifier = createNotifier(context);

  return {
    name,
    prefix,
    client,
    async get(key) {
      const text = await context.call('get', key, () => client.get(redisKeys(prefix, key).value));
      try {
        return decodeStored(text, serializer);
      } catch (cause) {
        const error = new RedisCacheError(
          'STAMPEDE_REDIS_DECODE',
          `cannot decode the entry of '${key}' (read as a miss): ${messageOf(cause)}`,
          { key, cause },
        );
        context.report('decode', key, error);
        return undefined;
      }
    },
    async set(key, entry, { ttl }) {
      let args: WriteGuardArgs | undefined;
      try {
        args = writeGuardArgs(entry, ttl, serializer);
      } catch (cause) {
        throw new RedisCacheError(
          'STAMPEDE_REDIS_ENCODE',
          `cannot serialise the value of '${key}' (not stored): ${messageOf(cause)}`,
          { key, cause },
        );
      }
      if (args === undefined) return;
      const { text, createdAt, px } = args;
      await context.call('set', key, () =>
        runScript(client, WRITE_SCRIPT, [redisKeys(prefix, key).value], [text, createdAt, px]),
      );
    },
    async delete(key) {
      await context.call('delete', key, () =>
        client.set(redisKeys(prefix, key).value, tombstone(), 'PX', Math.ceil(tombstoneTtl)),
      );
    },
    tryAcquireFillLock(key, ttl) {
      return acquireFillLock(context, key, ttl);
    },
    onFillDone(key, listener) {
      return pushWakeUp ? notifier.listen(key, listener) : () => {};
    },
    close() {
      return notifier.close();
    },
  };
}
