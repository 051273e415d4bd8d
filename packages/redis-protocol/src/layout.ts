// The storage layout every Redis-protocol adapter (@stampede/redis over TCP, @stampede/upstash over
// HTTP) shares, kept in this one package so they stay byte-compatible: pointed at one database with one prefix,
// they read each other's entries, honour each other's tombstones and contend for the same lock.

import {
  type CacheEntry,
  changeEntry,
  decodeEnvelope,
  encodeEnvelope,
  encodeTag,
  integerText,
  kindOf,
  type SerializerOption,
} from '@stampede/core/adapter';

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
  if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string; got ${kindOf(prefix)}`);
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
  // An empty key would make the empty hash tag `{}` the prefix is refused for.
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError(
      `key must be a non-empty string; got ${typeof key === 'string' ? 'an empty string' : kindOf(key)}`,
    );
  }
  const value = `${prefix}{${escapeTag(key)}}`;
  return { value, lock: `${value}:lock`, channel: `${value}:done` };
}

/**
 * The Redis key holding when `tag` was last invalidated (whole ms of the server's clock):
 * `<prefix>{<encoded tag>}:tag`, with the tag as {@link encodeTag} writes it in the envelope, so the
 * read script builds the same name from the envelope's text. No entry, lock or channel name ends in
 * `}:tag`. Under a prefix with its own hash tag (`app{1}:`) it shares the entries' slot.
 *
 * @example
 * tagKey('stampede:', 'user:42') // 'stampede:{user:42}:tag'
 */
export function tagKey(prefix: string, tag: string): string {
  checkRemotePrefix(prefix);
  return `${prefix}{${encodeTag(tag)}}:tag`;
}

/**
 * The Redis key holding the latest `createdAt` a direct write (`setValue`) of an entry carrying
 * `tag` was stamped with *past* the server's clock, because one of the entry's tags had been
 * invalidated in that very millisecond (or later): `<prefix>{<encoded tag>}:stamp`, in the slot of
 * the tag's own key. The next invalidation of the tag records at least this time, so it covers
 * that entry whichever of its tags it names. Written only then, and kept a minute past that time
 * (once the server's clock has passed it, the invalidation's own time covers the entry).
 *
 * @example
 * tagStampKey('stampede:', 'user:42') // 'stampede:{user:42}:stamp'
 */
export function tagStampKey(prefix: string, tag: string): string {
  checkRemotePrefix(prefix);
  return `${prefix}{${encodeTag(tag)}}:stamp`;
}

/** True when `prefix` carries its own hash tag, so every key of the cache lands in one Cluster slot. */
export function prefixPinsSlot(prefix: string): boolean {
  const open = prefix.indexOf('{');
  return open !== -1 && prefix.indexOf('}', open + 2) !== -1;
}

/**
 * The pub/sub channel of the invalidation bus of every cache on `prefix`: `<prefix>bus`. It cannot
 * be a key's channel (those end in `}:done`), and caches on one prefix share it, whichever binding
 * (ioredis, node-redis, Upstash) they use.
 *
 * @example
 * busChannel('stampede:') // 'stampede:bus'
 */
export function busChannel(prefix: string): string {
  return `${prefix}bus`;
}

/** What a tombstone (a delete's marker, holding its time) starts with; envelopes start with `s<version>|`. */
export const TOMBSTONE_PREFIX = 't|';

/**
 * The text of a tombstone made at `now`. The adapters of this release write tombstones with
 * {@link DELETE_LUA} (the time is Redis's own); this is kept for adapters of the first release.
 */
export function tombstone(now: number = Date.now()): string {
  return `${TOMBSTONE_PREFIX}${integerText(now)}`;
}

/**
 * The longest physical TTL sent to Redis as `PX`, in ms (2^53 - 1, about 285,000 years): Redis
 * takes any integer up to about 9.2e18 minus the current time, and every integer up to this bound
 * is written as plain digits. A longer TTL (`1e21`, `Number.MAX_VALUE`) is stored without `PX`,
 * which for any practical purpose is the same thing: it is kept until deleted or evicted, and its
 * freshness still comes from the envelope.
 */
export const MAX_PX = Number.MAX_SAFE_INTEGER;

/**
 * A duration as the `PX` argument of a lock or a tombstone: whole ms, at least 1, at most
 * {@link MAX_PX} (a lock must expire, so it is clamped rather than dropped).
 */
export function pxArgument(ms: number): string {
  return integerText(Math.min(MAX_PX, Math.max(1, Math.ceil(ms))));
}

/** `entry` with every time moved by `offset` ms (`Infinity` stays `Infinity`). */
function shifted(entry: CacheEntry, offset: number): CacheEntry {
  if (offset === 0) return entry;
  return changeEntry(entry, {
    createdAt: entry.createdAt + offset,
    freshUntil: entry.freshUntil + offset,
    staleUntil: entry.staleUntil + offset,
  });
}

/**
 * What a stored value means: nothing or a tombstone is a miss (`undefined`), anything else must be
 * an envelope. Its times are the Redis server's clock; `offset` (server minus local, from a
 * {@link ServerClock}) turns them into this process's clock, so freshness is judged the same way on
 * every replica whatever their clocks say.
 *
 * @throws TypeError (or the serializer's error) for text that is not an envelope of this version
 */
export function decodeStored(
  stored: unknown,
  serializer?: SerializerOption,
  offset = 0,
): CacheEntry | undefined {
  if (stored === null || stored === undefined) return undefined;
  if (typeof stored === 'string' && stored.startsWith(TOMBSTONE_PREFIX)) return undefined;
  const onServer = decodeEnvelope(stored, serializer);
  const entry = shifted(onServer, -offset);
  storedCreatedAt.set(entry, onServer.createdAt);
  return entry;
}

// The server-clock `createdAt` each decoded entry was stored with. A re-arm writes an entry back
// with the `createdAt` it was read with; converting that back through an offset estimate that
// moved in between would store another time, and the write guard would take the re-arm for an
// older fill (or a newer one).
const storedCreatedAt = new WeakMap<CacheEntry, number>();

/**
 * `entry.createdAt` on the server's clock when `entry` renews `renews` (`CacheSetOptions.renews`):
 * exactly what `renews` was stored with, if it was decoded here and the two share their `createdAt`.
 */
function renewedCreatedAt(entry: CacheEntry, renews: CacheEntry | undefined): number | undefined {
  if (renews === undefined || renews.createdAt !== entry.createdAt) return undefined;
  return storedCreatedAt.get(renews);
}

/** The arguments of {@link WRITE_GUARD_LUA} (ARGV 1 to 3) for one write. */
export interface WriteGuardArgs {
  /** The encoded envelope; `''` asks the script to remove the key (a tombstone at `createdAt`). */
  readonly text: string;
  /** The entry's `createdAt`, whole milliseconds of the server's clock. */
  readonly createdAt: string;
  /** The physical TTL for `PX`, whole milliseconds; `''` for none. For a removal, the tombstone's. */
  readonly px: string;
  /** `'1'` for a direct write (it replaces a tombstone whatever its time), else `''`. */
  readonly direct?: string | undefined;
}

/**
 * Encodes `entry` for the write guard, or `undefined` when a physical TTL of 0 means it is not
 * stored at all. This is what the adapters of the first release call; a physical TTL of 0 then
 * leaves any older value in place. Use {@link remoteWriteArgs}.
 *
 * @deprecated use {@link remoteWriteArgs}, which removes what is stored instead
 * @throws whatever the serializer throws for a value it cannot represent
 */
export function writeGuardArgs(
  entry: CacheEntry,
  ttl: number | undefined,
  serializer?: SerializerOption,
): WriteGuardArgs | undefined {
  if (ttl !== undefined && !(ttl > 0)) return undefined;
  return remoteWriteArgs(entry, ttl, { serializer, tombstoneTtl: 1, now: Number.NEGATIVE_INFINITY });
}

/** Options of {@link remoteWriteArgs}. */
export interface RemoteWriteOptions {
  /** Turns the value into text. @default jsonSerializer */
  readonly serializer?: SerializerOption | undefined;
  /** Server time minus local time in ms ({@link ServerClock}): entry times are stored on the server's clock. @default 0 */
  readonly offset?: number | undefined;
  /** How long (ms) the tombstone a removal leaves is kept. */
  readonly tombstoneTtl: number;
  /** The local time, to tell an entry already past its `staleUntil`. @default Date.now() */
  readonly now?: number | undefined;
  /** A direct write (`CacheSetOptions.direct`): it replaces a tombstone whatever its time. @default false */
  readonly direct?: boolean | undefined;
  /**
   * The entry this write renews (`CacheSetOptions.renews`): when it was decoded by
   * {@link decodeStored} and shares `entry`'s `createdAt`, that `createdAt` is stored exactly as it
   * was read, whatever `offset` is now. @default undefined
   */
  readonly renews?: CacheEntry | undefined;
  /**
   * The earliest `createdAt` the entry may carry on the server's clock: a fill that started after a
   * change this process made there had resolved is dated no earlier than that change. @default undefined
   */
  readonly atLeast?: number | undefined;
}

/**
 * The arguments of {@link WRITE_GUARD_LUA} for storing `entry` with physical TTL `ttl` (ms;
 * `undefined` for none). Times are moved to the server's clock by `offset`.
 *
 * An entry that would read as a miss at once (a physical TTL of 0, or an entry already past its
 * `staleUntil`) is a removal: the script replaces what is stored with a tombstone at the entry's
 * `createdAt` (kept `tombstoneTtl`), unless a newer entry is there. So `setValue(cache, key, value,
 * { ttl: 0 })` leaves the key reading as a miss, as it does in memory, and a fill that started
 * before it cannot bring the old value back. A physical TTL above {@link MAX_PX} is stored without
 * `PX`.
 *
 * @throws whatever the serializer throws for a value it cannot represent (also for a removal, so a
 * value is refused the same way whatever its TTL)
 */
export function remoteWriteArgs(
  entry: CacheEntry,
  ttl: number | undefined,
  options: RemoteWriteOptions,
): WriteGuardArgs {
  const exact = renewedCreatedAt(entry, options.renews);
  const moved = shifted(entry, options.offset ?? 0);
  const atLeast = options.atLeast;
  const onServer =
    exact !== undefined
      ? changeEntry(moved, { createdAt: exact })
      : atLeast !== undefined && moved.createdAt < atLeast
        ? changeEntry(moved, { createdAt: atLeast })
        : moved;
  const text = encodeEnvelope(onServer, options.serializer);
  const createdAt = integerText(onServer.createdAt);
  const now = options.now ?? Date.now();
  const direct = options.direct === true ? { direct: '1' } : {};
  if ((ttl !== undefined && !(ttl > 0)) || entry.staleUntil <= now) {
    return { text: '', createdAt, px: pxArgument(options.tombstoneTtl), ...direct };
  }
  const px = ttl === undefined || !(ttl <= MAX_PX) ? '' : integerText(Math.ceil(ttl));
  return { text, createdAt, px, ...direct };
}

// Redis before 5 refuses a write after a non-deterministic command (TIME) in a script unless the
// script asks for effects replication; from 5 on that is the default and the call is a no-op. TIME
// is called with `pcall`: a user whose ACL lacks it (it is in no category but @fast, so
// `+@read +@write +@scripting` leaves it out) gets the caller's estimate of the server's time,
// ARGV[n], instead of a failed delete.
const serverTimeOr = (argv: number) =>
  `if redis.replicate_commands then redis.replicate_commands() end
local t = redis.pcall('TIME')
local now
if t.err then now = tonumber(ARGV[${argv}]) else now = t[1] * 1000 + math.floor(t[2] / 1000) end
if not now then return redis.error_reply('ERR TIME refused and no time given in ARGV[${argv}]') end`;

// Lua: the body of the write guard (see WRITE_GUARD_LUA), with ARGV[prefixArgv] the prefix to find
// a tagged entry's tags' keys under ('' or absent where the script may not touch them).
const writeGuardLua = (prefixArgv: number) =>
  `
local current = redis.call('GET', KEYS[1])
if current and ARGV[4] ~= '1' then
  local created = tonumber(ARGV[2])
  local deleted = string.match(current, '^t|(%-?%d+)')
  if deleted then
    if tonumber(deleted) > created then return 0 end
  else
    local stored = string.match(current, '^s1t?|(%-?%d+)|%d*|%d*|')
      or string.match(current, '^s2t?|(%-?%d+)|%d*|%d*|%d+|')
    if stored and tonumber(stored) > created then return 0 end
  end
end
local text = ARGV[1]
local stamped = ARGV[4] == '1' and string.match(text, '^s[12]t|(%-?%d+)|')
if stamped then
  ${serverTimeOr(2)}
  local prefix = ARGV[${prefixArgv}] or ''
  if prefix ~= '' then
    local tags = string.match(text, '^s1t|%-?%d+|%d*|%d*|([^|]*)|')
      or string.match(text, '^s2t|%-?%d+|%d*|%d*|%d+|([^|]*)|') or ''
    local stamp = now
    for enc in string.gmatch(tags, '[^,]+') do
      local at = tonumber(redis.call('GET', prefix .. '{' .. enc .. '}:tag'))
      if at and at >= stamp then stamp = at + 1 end
    end
    if stamp > now then
      local s = string.format('%.0f', stamp)
      local px = string.format('%.0f', stamp - now + 60000)
      for enc in string.gmatch(tags, '[^,]+') do
        local k = prefix .. '{' .. enc .. '}:stamp'
        local w = tonumber(redis.call('GET', k))
        if not w or w < stamp then redis.call('SET', k, s, 'PX', px) end
      end
    end
    now = stamp
  end
  text = string.sub(text, 1, 4) .. string.format('%.0f', now) .. string.sub(text, 5 + #stamped)
end
if text == '' then
  redis.call('SET', KEYS[1], 't|' .. ARGV[2], 'PX', ARGV[3])
elseif ARGV[3] == '' then
  redis.call('SET', KEYS[1], text)
else
  redis.call('SET', KEYS[1], text, 'PX', ARGV[3])
end
return 1
`.trim();

/**
 * Lua: KEYS[1] value key; ARGV[1] envelope ('' to remove), ARGV[2] its createdAt, ARGV[3] PX ('' for
 * none; for a removal, the tombstone's), ARGV[4] '1' for a direct write, ARGV[5] (optional) the
 * prefix, '' where the script may not touch the tags' keys (a Redis Cluster whose prefix does not
 * pin one slot). Refuses (0) a fill's write
 * when the stored entry or a tombstone is newer than the fill's start, so a fill never replaces a
 * newer value nor undoes an invalidation that happened after it started. A direct write
 * (`setValue`) replaces whatever is stored: the value its caller sets is the latest it knows, and
 * two replicas' direct writes land in the order Redis runs them, whatever their estimates of its
 * clock. A removal that is not refused leaves a tombstone at its createdAt.
 *
 * A direct write of a tagged entry is dated by Redis, not by its writer's estimate of Redis's clock
 * (which may run ahead by half the round trip it was measured with, enough for a tag invalidation
 * made after the write resolved to miss it): the envelope's `createdAt` is rewritten to `TIME`
 * (ARGV[2] when `TIME` is refused). With ARGV[5] given, when one of its tags was recorded at or
 * after that time (an invalidation in the same millisecond, which its caller made before this
 * write), it is dated just past the latest such record, and that date is kept in each of its tags'
 * {@link tagStampKey} so that the next invalidation of any of them covers it
 * ({@link INVALIDATE_TAGS_LUA}). Without ARGV[5] it keeps `TIME`: a value set in the millisecond of
 * an invalidation then reads as invalidated (a miss, never an invalidated value served).
 *
 * Only a well-formed header of an envelope version this release reads (`s1|` without `delta`, `s2|`
 * with it, and their tagged forms `s1t|`, `s2t|`) counts as an entry: anything else stored there (garbage, another version) reads as a
 * miss, so it must never block the write that repairs it.
 * Every time compared here is the Redis server's clock (tombstones from `TIME`, entries converted
 * by the writer's {@link ServerClock}), never two replicas' clocks against each other.
 */
export const WRITE_GUARD_LUA = writeGuardLua(5);

/**
 * Lua: KEYS[1] value key, KEYS[2] (optional) the key's lock key, where the locks live with the
 * values; ARGV[1] PX (the tombstone's TTL); ARGV[2] the caller's estimate of the server's time in
 * ms, used only when `TIME` is refused. Replaces the entry with a tombstone holding the Redis
 * server's time (`TIME`, in ms), so the write guard compares a fill's start with the deletion on
 * one clock, the server's, whatever the replicas' clocks say. While a fill holds the key's lock the
 * tombstone lives at least as long as the lock, and {@link EXTEND_LOCK_LUA} extends it with the
 * lock: a locked fill that started before the delete can never outlive it and write its older value.
 * Returns the tombstone's time (an integer: the adapter dates this process's later fills of the key
 * no earlier, see `cache.ts`). `PTTL` is called with `pcall`: a user who may not run it (an ACL line
 * from before it was needed) still deletes, with the plain `tombstoneTtl`, and the script returns the
 * refusal's text instead, so that the adapter warns: that tombstone no longer outlives the lock.
 */
export const DELETE_LUA = `
${serverTimeOr(2)}
local px = tonumber(ARGV[1])
local refused
if KEYS[2] then
  local held = redis.pcall('PTTL', KEYS[2])
  if type(held) == 'number' then
    if held > px then px = held end
  else
    refused = held.err or 'PTTL failed'
  end
end
redis.call('SET', KEYS[1], 't|' .. string.format('%.0f', now), 'PX', px)
return refused or now
`.trim();

/**
 * Lua: KEYS[1] value key; ARGV[1] the prefix. `GET` of the entry, except that a tagged entry (`s1t|`
 * or `s2t|`) one of whose tags was invalidated at or after its `createdAt` reads as nil: one round
 * trip for a tagged hit, compared on the server's clock. It reads each tag's key (see {@link tagKey}) by a name built
 * from the envelope, so in Redis Cluster every key must share a slot (a prefix with a hash tag);
 * without one, the adapter reads the tags apart (see the README). Sent with the `no-writes` flag
 * ({@link NO_WRITES}) so that it runs, like a `GET`, on a read-only replica and while writes are
 * paused (`CLIENT PAUSE WRITE`, as during a failover).
 */
export const TAGGED_GET_LUA = `
local v = redis.call('GET', KEYS[1])
if not v then return false end
local created, tags = string.match(v, '^s1t|(%-?%d+)|%d*|%d*|([^|]*)|')
if not created then created, tags = string.match(v, '^s2t|(%-?%d+)|%d*|%d*|%d+|([^|]*)|') end
if not created then return v end
created = tonumber(created)
for enc in string.gmatch(tags, '[^,]+') do
  local at = tonumber(redis.call('GET', ARGV[1] .. '{' .. enc .. '}:tag'))
  if at and at >= created then return false end
end
return v
`.trim();

/**
 * The shebang that declares a script read-only (Redis 7 and later). An older server refuses to
 * compile it; the adapters then send the script without it.
 */
export const NO_WRITES = '#!lua flags=no-writes\n';

/**
 * Lua: KEYS in pairs, a tag's key ({@link tagKey}) then its {@link tagStampKey} (the last one's may
 * be left out); ARGV[1] the caller's estimate of the server's time in ms, used only when `TIME` is
 * refused. Records Redis's time (ms) as each tag's invalidation time, or the tag's stamp when that
 * is later (a direct write dated past Redis's time, see {@link WRITE_GUARD_LUA}: the record must
 * cover it), never moving one back; returns the latest record the tags now hold (at least Redis's
 * time: the adapter dates this process's later fills carrying them past it, see `cache.ts`).
 * Entries are compared with it on read.
 */
export const INVALIDATE_TAGS_LUA = `
${serverTimeOr(1)}
local latest = now
for i = 1, #KEYS, 2 do
  local record = now
  local stamp = KEYS[i + 1] and tonumber(redis.call('GET', KEYS[i + 1]))
  if stamp and stamp > record then record = stamp end
  local at = tonumber(redis.call('GET', KEYS[i]))
  if not at or at < record then redis.call('SET', KEYS[i], string.format('%.0f', record)) else record = at end
  if record > latest then latest = record end
end
return string.format('%.0f', latest)
`.trim();

/** Lua, no keys: the Redis server's time in whole ms (an integer reply). */
export const SERVER_TIME_LUA = `
local t = redis.call('TIME')
return t[1] * 1000 + math.floor(t[2] / 1000)
`.trim();

/**
 * The offset between the Redis server's clock and this process's, so that the times a remote cache
 * stores (an entry's `createdAt`, `freshUntil`, `staleUntil`; a tombstone's time) are all on the
 * server's clock. Replicas whose clocks disagree by minutes then still agree on which of a fill and
 * a delete came first, and on how long a value is fresh.
 */
export interface ServerClock {
  /** The current estimate (server minus local, whole ms), or `undefined` before the first one. */
  readonly offset: number | undefined;
  /**
   * An offset never ahead of the server's (the low end of what the measurements prove, let out for
   * drift since), or {@link offset} when nothing is proven: a fill's times move by it, so a fill
   * never looks newer than it is (than a delete, a tag invalidation or a `setValue` made after its
   * start, to within the other side's own estimate).
   */
  readonly floor: number | undefined;
  /**
   * An offset never behind the server's (the high end of what is proven, let out for drift), or
   * {@link offset} when nothing is proven: a delete or tag invalidation that cannot read `TIME` is
   * recorded by it, so no fill that started before it looks newer.
   */
  readonly ceiling: number | undefined;
  /**
   * The estimate to use now. Before the first measurement, a promise of it (it measures; a failed
   * measurement gives 0, this process's own clock, and is retried on a later call). Afterwards the
   * number itself, and when it is older than the refresh interval a new measurement starts in the
   * background (never awaited). Never rejects.
   */
  current(): number | Promise<number>;
}

// An estimate proven only within more than this many ms is re-measured every UNCERTAIN_RETRY_MS.
const UNCERTAIN_MS = 10;
const UNCERTAIN_RETRY_MS = 250;

// How fast two unsynchronised quartz clocks may drift apart: 100 ppm, twice the usual tolerance.
const DRIFT_PER_MS = 1e-4;

/** Options of {@link createServerClock}. */
export interface ServerClockOptions {
  /** How old an estimate may get before a call starts a new measurement. @default 10000 (ms) */
  readonly refreshInterval?: number | undefined;
  /** After a failed first measurement, calls use 0 for this long before trying again. @default 1000 (ms) */
  readonly retryAfter?: number | undefined;
}

/**
 * A {@link ServerClock} that measures with `readServerTime` (the server's time in ms, for instance
 * by {@link SERVER_TIME_LUA}; bound it in time). A measurement taken between local times `before`
 * and `after` proves the offset lies in `[server - after, server - before]` (widened by 1 ms for
 * Date.now()'s resolution). Successive measurements narrow what is proven (their intersection, let
 * out by 100 ppm of the time since, for the clocks' drift). The estimate is set from the first
 * interval and moves only when a measurement proves it wrong (a clock was stepped, or drifted), so
 * it does not wobble with network jitter and times read back exactly as written. It is set to the
 * middle of what is proven when that is within 10 ms (error at most half of it, either way), and to
 * its low end when it is wider: after a slow round trip (a cold connection, a paused server) the
 * server may have read its time at the very end, and the middle would be up to half the round trip
 * ahead, enough for an entry filled just before a tag invalidation or a delete to read as made
 * after it. The low end is never ahead (but for drift): such an estimate errs only towards a fill
 * looking older than it is (an extra recompute) until a tighter measurement, taken within 250 ms,
 * moves it.
 *
 * No timer is left running and no promise is shared between calls (edge runtimes do not let one
 * request await another's I/O): estimates are refreshed only when a call comes.
 */
export function createServerClock(
  readServerTime: () => Promise<unknown>,
  options: ServerClockOptions = {},
): ServerClock {
  const refreshInterval = options.refreshInterval ?? 10_000;
  const retryAfter = options.retryAfter ?? 1_000;
  let offset: number | undefined;
  // What the measurements so far prove about the offset, as of local time `provenAt`.
  let low = Number.NEGATIVE_INFINITY;
  let high = Number.POSITIVE_INFINITY;
  let provenAt = 0;
  // Local times of the last measurement started, and of the last failed first measurement.
  let lastStart = Number.NEGATIVE_INFINITY;
  let lastFailure = Number.NEGATIVE_INFINITY;

  const measure = async (): Promise<number | undefined> => {
    const before = Date.now();
    lastStart = before;
    let server: number;
    try {
      server = Number(await readServerTime());
    } catch {
      if (offset === undefined) lastFailure = Date.now();
      return offset;
    }
    const after = Date.now();
    if (!Number.isFinite(server)) return offset;
    const from = server - Math.max(before, after) - 1;
    const to = server - Math.min(before, after) + 1;
    const drift = Math.abs(after - provenAt) * DRIFT_PER_MS;
    if (from > high + drift || to < low - drift) {
      low = from;
      high = to;
    } else {
      low = Math.max(low - drift, from);
      high = Math.min(high + drift, to);
    }
    provenAt = after;
    if (offset === undefined || offset < low || offset > high) {
      // Proven within a few ms: the middle. Proven only loosely (a slow round trip): the low end,
      // never ahead of the server, until a tighter measurement proves it wrong.
      offset = high - low > UNCERTAIN_MS ? Math.floor(low) : Math.round((low + high) / 2);
    }
    return offset;
  };

  // At least a millisecond: otherwise a write in the very millisecond of a measurement would be
  // stamped a millisecond off the next one's, and two writes of one fill's `createdAt` (a tie the
  // write must win) would no longer tie.
  const drift = (): number => Math.max(1, Math.abs(Date.now() - provenAt) * DRIFT_PER_MS);
  return {
    get offset() {
      return offset;
    },
    get floor() {
      return offset === undefined || !Number.isFinite(low)
        ? offset
        : Math.min(offset, Math.floor(low - drift()));
    },
    get ceiling() {
      return offset === undefined || !Number.isFinite(high)
        ? offset
        : Math.max(offset, Math.ceil(high + drift()));
    },
    current() {
      const now = Date.now();
      if (offset !== undefined) {
        // While what is proven is wider than a few ms (the measuring round trip was slow: a loaded
        // machine, a cold connection), measure again soon: one fast round trip narrows it.
        const interval =
          high - low > UNCERTAIN_MS ? Math.min(refreshInterval, UNCERTAIN_RETRY_MS) : refreshInterval;
        if (now - lastStart >= interval) void measure();
        return offset;
      }
      if (now - lastFailure < retryAfter) return 0;
      return measure().then((measured) => measured ?? 0);
    },
  };
}

/**
 * Lua: KEYS[1] lock key, KEYS[2] channel; ARGV[1] token, ARGV[2] outcome ('' for none). Deletes the
 * lock only if the token still owns it, then announces the outcome on the channel: one round trip,
 * so waiters hear of the fill as soon as the lock is free. A token whose lock lapsed and was taken by
 * another holder announces nothing: the waiters are waiting for that holder now, and a late release
 * (a retry after a fault) would wake them to a read for nothing. One whose lock lapsed and is free
 * still announces: its waiters may take it at once instead of at their next poll. Returns 1 when it
 * deleted the lock, else 0.
 */
export const RELEASE_LOCK_LUA = `
local holder = redis.call('GET', KEYS[1])
local released = 0
if holder == ARGV[1] then
  released = redis.call('DEL', KEYS[1])
elseif holder then
  return 0
end
if ARGV[2] ~= '' then redis.call('PUBLISH', KEYS[2], ARGV[2]) end
return released
`.trim();

/**
 * Lua: KEYS[1] lock key, KEYS[2] (optional) the key's value key, where the locks live with the
 * values; ARGV[1] token, ARGV[2] new TTL in ms. Extends the lock only for its owner, and a tombstone
 * on the key as long as the lock (see {@link DELETE_LUA}): a delete made while the fill runs keeps
 * refusing its older value until the lock ends. A tombstone older than the fill refuses nothing of
 * it, so keeping it longer costs only its few bytes. Returns 1 when it extended the lock, else 0. A
 * refused `PTTL` (`pcall`) leaves the tombstone as it is, and the script returns the refusal's text
 * instead of 1 (the lock was extended), so that the adapter warns.
 */
export const EXTEND_LOCK_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local extended = redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    local v = redis.call('GET', KEYS[2])
    if v and string.sub(v, 1, 2) == 't|' then
      local left = redis.pcall('PTTL', KEYS[2])
      if type(left) ~= 'number' then return left.err or 'PTTL failed' end
      if left < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
    end
  end
  return extended
end
return 0
`.trim();

// Lua: whether a stored value `v` (an envelope) reads as an entry once its tags are checked, like
// TAGGED_GET_LUA: true for an untagged envelope or one none of whose tags was invalidated at or after
// its createdAt, false for an invalidated one, nil for a tagged one when `prefix` is '' (its tags
// are read apart, by the adapter, in a Cluster whose prefix does not pin the slot).
const VISIBLE_LUA = `
local function visible(v, prefix)
  local created, tags = string.match(v, '^s1t|(%-?%d+)|%d*|%d*|([^|]*)|')
  if not created then created, tags = string.match(v, '^s2t|(%-?%d+)|%d*|%d*|%d+|([^|]*)|') end
  if not created then return true end
  if prefix == '' then return nil end
  created = tonumber(created)
  for enc in string.gmatch(tags, '[^,]+') do
    local at = tonumber(redis.call('GET', prefix .. '{' .. enc .. '}:tag'))
    if at and at >= created then return false end
  end
  return true
end
`.trim();

/**
 * Lua: KEYS[1] value key, KEYS[2] lock key; ARGV[1] token, ARGV[2] the lock's PX, ARGV[3] the prefix
 * ('' to leave a tagged entry's tags to the caller). Tries `SET lock token NX PX` and reads the entry
 * in the same step: one round trip for a holder's lock and its double-check read, or for a loser's
 * attempt and a look at what is there. Returns `{granted, holder, value}`: `granted` 1 or 0, `holder`
 * the token that holds the lock now (ours when granted), `value` what {@link TAGGED_GET_LUA} would
 * return (nil for nothing or a tag-invalidated entry; a tombstone is returned as it is, and read as
 * a miss by the adapter; with ARGV[3] '' a tagged entry is returned unchecked).
 */
export const LOCK_AND_READ_LUA = `
${VISIBLE_LUA}
local granted = redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2])
local holder = ARGV[1]
if not granted then holder = redis.call('GET', KEYS[2]) or '' end
local v = redis.call('GET', KEYS[1])
if v and ARGV[3] ~= '' and visible(v, ARGV[3]) == false then v = false end
return {granted and 1 or 0, holder, v}
`.trim();

/**
 * The longest stored text (in bytes) that an announcement of a fill's end carries, so that a woken
 * waiter need not read the key: 64 KiB. A larger entry is announced as the bare outcome, and the
 * waiters read it (every replica waiting on the key receives the announcement, so a bound keeps a
 * large value from being pushed to each of them on top of the reads they would make anyway).
 */
export const ANNOUNCED_VALUE_LIMIT = 65_536;

/** What an announcement carrying a value starts with: `filled|<holder token>|<stored text>`. */
export const ANNOUNCED_PREFIX = 'filled|';

/**
 * Lua: KEYS[1] value key, KEYS[2] lock key, KEYS[3] channel; ARGV[1] to ARGV[4] those of
 * {@link WRITE_GUARD_LUA} (envelope, createdAt, PX, direct), ARGV[5] the lock's token, ARGV[6] the
 * announcement ('' for none, else 'filled'), ARGV[7] the prefix ('' to leave tagged entries out of
 * announcements; also the write guard's ARGV[5], for a direct write), ARGV[8] the longest text an announcement carries. A holder's commit in one round
 * trip: the guarded write (refused, as ever, by a newer entry or tombstone), then the lock's
 * compare-and-delete (only this token's lock: a lapsed holder never frees the next one's), then the
 * announcement. The announcement carries what a read of the key gives now (`filled|<token>|<text>`,
 * the written entry or the newer one that refused it, tags checked) when that fits in ARGV[8] bytes
 * and is on one line (Upstash's pub/sub is a line-based stream: a serializer's line break would cut
 * the message there), else the bare `filled`. Returns 1 when written, 0 when refused.
 *
 * It announces unless its lock lapsed and was taken by another holder while it neither stored a
 * value: a holder whose lock was taken since still announces a value it stored (the key holds a
 * fresh entry now, and the other holder's waiters, hearing a holder not theirs, read it and are done
 * before that fill ends); having stored nothing (its write refused, or a removal), it announces
 * nothing, as {@link RELEASE_LOCK_LUA} does: those waiters would only read and contend for nothing.
 */
export const COMMIT_LUA = `
${VISIBLE_LUA}
local function write()
${writeGuardLua(7)}
end
local wrote = write()
local holder = redis.call('GET', KEYS[2])
if holder == ARGV[5] then redis.call('DEL', KEYS[2]) end
if ARGV[6] ~= '' and (holder == ARGV[5] or not holder or (wrote == 1 and ARGV[1] ~= '')) then
  local message = ARGV[6]
  local v = redis.call('GET', KEYS[1])
  if v and #v <= tonumber(ARGV[8]) and string.sub(v, 1, 2) ~= 't|' and not string.find(v, '[\\r\\n]')
      and visible(v, ARGV[7]) then
    message = '${ANNOUNCED_PREFIX}' .. ARGV[5] .. '|' .. v
  end
  redis.call('PUBLISH', KEYS[3], message)
end
return wrote
`.trim();
