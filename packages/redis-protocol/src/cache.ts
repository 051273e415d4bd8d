import {
  type CacheEntry,
  type CacheSetOptions,
  ENVELOPE_VERSION,
  type FillLock,
  messageOf,
  roundTripValue,
  type Serializer,
} from '@stampede/core/adapter';
import type { RedisProtocolContext } from './context.js';
import type { RedisProtocolErrorFactory } from './errors.js';
import { acquireFillLock } from './fill-lock.js';
import {
  createServerClock,
  decodeStored,
  prefixPinsSlot,
  pxArgument,
  remoteKeys,
  remoteWriteArgs,
  tagKey,
  type WriteGuardArgs,
} from './layout.js';
import {
  DELETE_SCRIPT,
  GET_SCRIPT,
  GET_SCRIPT_WITHOUT_FLAGS,
  INVALIDATE_TAGS_SCRIPT,
  TIME_SCRIPT,
  WRITE_SCRIPT,
} from './scripts.js';

/** What {@link createRedisProtocolCache} needs besides the context. */
export interface RedisProtocolCacheSettings {
  /** The serializer (already resolved with `toSerializer`). */
  readonly serializer: Serializer;
  /** How long a delete's tombstone is kept, in ms. */
  readonly tombstoneTtl: number;
  /** Builds the binding's error for an encode or decode fault. */
  readonly createError: RedisProtocolErrorFactory;
}

/** The `Cache` operations every Redis-protocol binding shares. */
export interface RedisProtocolCache {
  /**
   * The entry for `key`, its times on this process's clock; a tombstone, an expired or an
   * undecodable entry (reported, code `E_STAMPEDE_BACKEND_DECODE`) is `undefined`.
   */
  get(key: string): Promise<CacheEntry | undefined>;
  /**
   * Writes `entry` with `PX ttl` through the write guard, unless a newer entry or tombstone is
   * there; an entry that would read as a miss at once removes what is stored instead.
   * @throws an `E_STAMPEDE_BACKEND_ENCODE` error for a value the serializer refuses
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<void>;
  /** Replaces the entry with a tombstone holding Redis's own time, kept `tombstoneTtl`. */
  delete(key: string): Promise<void>;
  /** `value` through the serializer and back: what a later `get` returns for it. */
  roundTrip(value: unknown): unknown;
  /** `SET NX PX` with a random token; `undefined` when another holder has the lock. */
  tryAcquireFillLock(key: string, ttl: number): Promise<FillLock | undefined>;
  /**
   * Records Redis's time as the invalidation time of each tag (one key per tag, never a scan):
   * entries carrying one of them created at or before it read as misses from then on.
   */
  invalidateTags(tags: readonly string[]): Promise<void>;
}

/**
 * The shared body of a Redis-protocol cache on `context`. Entries are stored as the versioned
 * envelope with their times on the Redis server's clock (the offset is measured with `TIME` on
 * first use and refreshed by later calls, never on a hit's critical path once known); writes,
 * deletes and lock releases are handed to the context's `waitUntil`.
 */
export function createRedisProtocolCache(
  context: RedisProtocolContext,
  settings: RedisProtocolCacheSettings,
): RedisProtocolCache {
  const { client, prefix, operations, runScript } = context;
  const { serializer, tombstoneTtl, createError } = settings;
  const clock = createServerClock(() =>
    operations.call('time', undefined, () => runScript(TIME_SCRIPT, [], [])),
  );

  // In a Cluster, the read script may touch the tags' keys only when they share the entry's slot.
  const tagsApart = client.cluster === true && !prefixPinsSlot(prefix);
  // One round trip, tagged or not: the script compares the entry's tags on the server. A server
  // that cannot compile the script's flags (before Redis 7) gets it without them from then on.
  let getScript = GET_SCRIPT;
  const read = async (key: string): Promise<unknown> => {
    const keys = [remoteKeys(prefix, key).value];
    try {
      return await runScript(getScript, keys, [prefix]);
    } catch (error) {
      if (getScript !== GET_SCRIPT || !/compil|shebang|unexpected symbol/i.test(messageOf(error)))
        throw error;
      getScript = GET_SCRIPT_WITHOUT_FLAGS;
      return runScript(getScript, keys, [prefix]);
    }
  };
  // Cluster without a slot-pinning prefix: GET, then (only for a tagged entry) its tags' keys.
  const readApart = async (key: string): Promise<unknown> => {
    const stored = await client.get(remoteKeys(prefix, key).value);
    const header = typeof stored === 'string' ? TAGGED_HEADER.exec(stored) : null;
    if (header === null) return stored;
    const createdAt = Number(header[1]);
    const tags = (header[2] ?? '').split(',').filter((tag) => tag.length !== 0);
    const times = await Promise.all(tags.map((tag) => client.get(`${prefix}{${tag}}:tag`)));
    return times.some((at) => at !== null && at !== undefined && Number(at) >= createdAt) ? null : stored;
  };

  return {
    async get(key) {
      // Started before the GET so that, on first use, both travel together.
      const offset = clock.current();
      const stored = await operations.call('get', key, () => (tagsApart ? readApart(key) : read(key)));
      try {
        return decodeStored(stored, serializer, await offset);
      } catch (cause) {
        const error = createError(
          'E_STAMPEDE_BACKEND_DECODE',
          `cannot decode the entry of '${key}' (read as a miss): ${messageOf(cause)}`,
          { key, cause },
        );
        operations.report('decode', key, error);
        return undefined;
      }
    },
    async set(key, entry, { ttl, direct }) {
      const offset = await clock.current();
      let args: WriteGuardArgs;
      try {
        args = remoteWriteArgs(entry, ttl, { serializer, offset, tombstoneTtl, direct });
      } catch (cause) {
        throw createError(
          'E_STAMPEDE_BACKEND_ENCODE',
          `cannot serialise the value of '${key}' (not stored): ${messageOf(cause)}`,
          { key, cause },
        );
      }
      const { text, createdAt, px } = args;
      await operations.keepAlive(
        operations.call('set', key, () =>
          runScript(WRITE_SCRIPT, [remoteKeys(prefix, key).value], [text, createdAt, px, args.direct ?? '']),
        ),
      );
    },
    async delete(key) {
      await operations.keepAlive(
        operations.call('delete', key, () =>
          runScript(DELETE_SCRIPT, [remoteKeys(prefix, key).value], [pxArgument(tombstoneTtl)]),
        ),
      );
    },
    roundTrip(value) {
      return roundTripValue(value, serializer);
    },
    tryAcquireFillLock(key, ttl) {
      return acquireFillLock(context, key, ttl);
    },
    async invalidateTags(tags) {
      // One script per tag: a tag's key is in its own slot in a Cluster (a few parallel calls).
      await operations.keepAlive(
        Promise.all(
          tags.map((tag) =>
            operations.call('tags', undefined, () =>
              runScript(INVALIDATE_TAGS_SCRIPT, [tagKey(prefix, tag)], []),
            ),
          ),
        ),
      );
    },
  };
}

// The header of a tagged envelope: its createdAt (server clock) and its encoded tags.
const TAGGED_HEADER = new RegExp(`^s${ENVELOPE_VERSION}t\\|(-?\\d+)\\|\\d*\\|\\d*\\|([^|]*)\\|`);
