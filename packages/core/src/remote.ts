// The storage layout every Redis-protocol adapter (@stampede/redis over TCP, @stampede/upstash over
// HTTP) shares, kept here so the two stay byte-compatible: pointed at one database with one prefix,
// they read each other's entries, honour each other's tombstones and contend for the same lock.

import type { CacheEntry } from './cache.js';
import { decodeEnvelope, ENVELOPE_VERSION, encodeEnvelope, type Serializer } from './envelope.js';
import { setLongTimeout } from './timers.js';

/** The Redis names one cache key maps to. */
export interface RemoteKeys {
  /** Holds the envelope (or, after a delete, a tombstone). */
  readonly value: string;
  /** The fill lock. */
  readonly lock: string;
  /** The pub/sub channel on which a fill's end is announced. */
  readonly channel: string;
}

// Percent-encoding `%`, `{` and `}` is injective and leaves no brace in the tag, so a user key can
// neither end the hash tag early nor open a second one. Lone surrogates are encoded too (`%uD800`):
// UTF-8 has no bytes for them, so clients turn every one into U+FFFD and two keys would collide.
const TAG_UNSAFE = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function escapeTag(key: string): string {
  return key.replace(TAG_UNSAFE, (char) => {
    if (char === '%') return '%25';
    if (char === '{') return '%7B';
    if (char === '}') return '%7D';
    return `%u${char.charCodeAt(0).toString(16).toUpperCase()}`;
  });
}

/**
 * Throws a RangeError for a prefix that would split one key's names across Redis Cluster slots: one
 * whose first `{` is directly followed by `}` (an empty hash tag makes Redis hash each whole name).
 */
export function checkRemotePrefix(prefix: string): void {
  const open = prefix.indexOf('{');
  if (open !== -1 && prefix[open + 1] === '}') {
    throw new RangeError(
      `prefix ${JSON.stringify(prefix)} opens an empty hash tag ('{}'): in Redis Cluster a key's value, lock and channel would land in different slots`,
    );
  }
}

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel. In Redis Cluster the three share a
 * hash slot: the first `{` is at or before ours, and our `}` (or a `}` in the prefix) closes it. A
 * prefix may carry its own hash tag (`app{1}:` puts every key in one slot).
 *
 * @throws RangeError for a prefix whose first `{` is directly followed by `}`
 * @example
 * remoteKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function remoteKeys(prefix: string, key: string): RemoteKeys {
  checkRemotePrefix(prefix);
  const value = `${prefix}{${escapeTag(key)}}`;
  return { value, lock: `${value}:lock`, channel: `${value}:done` };
}

/** What a tombstone (a delete's marker, holding its time) starts with; envelopes start with `s<version>|`. */
export const TOMBSTONE_PREFIX = 't|';

/** The text a delete stores: a tombstone holding the deletion time, which the write guard compares. */
export function tombstone(now: number = Date.now()): string {
  return `${TOMBSTONE_PREFIX}${Math.round(now)}`;
}

/**
 * What a stored value means: nothing or a tombstone is a miss (`undefined`), anything else must be
 * an envelope.
 *
 * @throws TypeError (or the serializer's error) for text that is not an envelope of this version
 */
export function decodeStored(stored: unknown, serializer?: Serializer): CacheEntry | undefined {
  if (stored === null || stored === undefined) return undefined;
  if (typeof stored === 'string' && stored.startsWith(TOMBSTONE_PREFIX)) return undefined;
  return decodeEnvelope(stored, serializer);
}

/** The arguments of {@link WRITE_GUARD_LUA} (ARGV 1 to 3) for one write. */
export interface WriteGuardArgs {
  /** The encoded envelope. */
  readonly text: string;
  /** The entry's `createdAt`, whole milliseconds. */
  readonly createdAt: string;
  /** The physical TTL for `PX`, whole milliseconds; `''` for none. */
  readonly px: string;
}

/**
 * Encodes `entry` for the write guard, or `undefined` when a physical TTL of 0 means it is not
 * stored at all.
 *
 * @throws whatever the serializer throws for a value it cannot represent
 */
export function writeGuardArgs(
  entry: CacheEntry,
  ttl: number | undefined,
  serializer?: Serializer,
): WriteGuardArgs | undefined {
  if (ttl !== undefined && !(ttl > 0)) return undefined;
  return {
    text: encodeEnvelope(entry, serializer),
    createdAt: String(Math.round(entry.createdAt)),
    px: ttl === undefined || ttl === Number.POSITIVE_INFINITY ? '' : String(Math.ceil(ttl)),
  };
}

/**
 * Lua: KEYS[1] value key; ARGV[1] envelope, ARGV[2] its createdAt, ARGV[3] PX ('' for none).
 * Refuses (0) when the stored entry is newer or a tombstone is newer than the fill's start, so a
 * fill never replaces a newer value nor undoes an invalidation that happened after it started.
 * Only a well-formed header of this envelope version counts as an entry: anything else stored there
 * (garbage, another version) reads as a miss, so it must never block the write that repairs it.
 */
export const WRITE_GUARD_LUA = `
local current = redis.call('GET', KEYS[1])
if current then
  local created = tonumber(ARGV[2])
  local deleted = string.match(current, '^t|(%-?%d+)')
  if deleted then
    if tonumber(deleted) > created then return 0 end
  else
    local stored = string.match(current, '^s${ENVELOPE_VERSION}|(%-?%d+)|%d*|%d*|')
    if stored and tonumber(stored) > created then return 0 end
  end
end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
return 1
`.trim();

/**
 * Lua: KEYS[1] lock key, KEYS[2] channel; ARGV[1] token, ARGV[2] outcome ('' for none). Deletes the
 * lock only if the token still owns it, then announces the outcome on the channel: one round trip,
 * so waiters hear of the fill as soon as the lock is free.
 */
export const RELEASE_LOCK_LUA = `
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  released = redis.call('DEL', KEYS[1])
end
if ARGV[2] ~= '' then redis.call('PUBLISH', KEYS[2], ARGV[2]) end
return released
`.trim();

/** Lua: KEYS[1] lock key; ARGV[1] token, ARGV[2] new TTL in ms. Extends the lock only for its owner. */
export const EXTEND_LOCK_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`.trim();

/**
 * Races `command` against `ms` milliseconds: on time-out the promise rejects with `onTimeout()`.
 * The command itself cannot be cancelled (it may sit in a client's offline queue, or a server may
 * answer late), so `onLate` is told its value if it succeeds after all. Any `ms` is honoured, also
 * one past the 24.8-day timer limit.
 */
export function raceTimeout<T>(
  command: Promise<T>,
  ms: number,
  onTimeout: () => Error,
  onLate?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timedOut = false;
    const timer = setLongTimeout(() => {
      timedOut = true;
      reject(onTimeout());
    }, ms);
    command.then(
      (value) => {
        if (timedOut) onLate?.(value);
        else {
          timer.clear();
          resolve(value);
        }
      },
      (error: unknown) => {
        if (timedOut) return;
        timer.clear();
        reject(error);
      },
    );
  });
}
