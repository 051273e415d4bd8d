import {
  type CacheEntry,
  type CacheSetOptions,
  checkCacheKey,
  checkCacheWrite,
  checkLockTtl,
  checkTagList,
  type FillAnnouncement,
  type FillLock,
  type FillLockAttempt,
  type FillOutcome,
  type MaybePromise,
  messageOf,
  roundTripValue,
  type Serializer,
} from '@stampede/core/adapter';
import type { RedisProtocolClient } from './client.js';
import type { RedisProtocolContext } from './context.js';
import type { RedisProtocolErrorFactory } from './errors.js';
import { checkEvictionPolicy } from './eviction.js';
import { acquireFillLock, acquireFillLockAndRead, type FillLockWriter } from './fill-lock.js';
import {
  ANNOUNCED_PREFIX,
  createServerClock,
  decodeStored,
  prefixPinsSlot,
  pxArgument,
  remoteKeys,
  remoteWriteArgs,
  tagKey,
  tagStampKey,
  type WriteGuardArgs,
} from './layout.js';
import { createUndecodableWatch } from './refused-writes.js';
import {
  COMMIT_SCRIPT,
  DELETE_SCRIPT,
  EXTEND_SCRIPT,
  GET_SCRIPT,
  GET_SCRIPT_WITHOUT_FLAGS,
  INVALIDATE_TAGS_SCRIPT,
  LOCK_AND_READ_SCRIPT,
  type LuaScript,
  RELEASE_SCRIPT,
  TIME_SCRIPT,
  WRITE_SCRIPT,
} from './scripts.js';
import { createSlowReadWatch } from './slow-reads.js';
import { randomToken } from './web-crypto.js';

/** What {@link createRedisProtocolCache} needs besides the context. */
export interface RedisProtocolCacheSettings {
  /** The serializer (already resolved with `toSerializer`). */
  readonly serializer: Serializer;
  /** How long a delete's tombstone is kept, in ms. */
  readonly tombstoneTtl: number;
  /** Builds the binding's error for an encode or decode fault. */
  readonly createError: RedisProtocolErrorFactory;
}

/**
 * The `Cache` operations every Redis-protocol binding shares. Each refuses bad arguments before it
 * sends anything, rejecting with a `TypeError` (or `RangeError`) that names the argument: a key that
 * is not a non-empty string, an entry that is not a `CacheEntry`, set options that are not a
 * `CacheSetOptions` object, tags that are not an array of non-empty strings, a lock TTL that is not
 * a finite number of ms of at least 1 (see the checks of `@stampede/core/adapter`).
 */
export interface RedisProtocolCache {
  /**
   * The entry for `key`, its times on this process's clock; a tombstone, an expired or an
   * undecodable entry (reported, code `E_STAMPEDE_BACKEND_DECODE`) is `undefined`.
   */
  get(key: string): Promise<CacheEntry | undefined>;
  /**
   * Writes `entry` with `PX ttl` through the write guard, unless a newer entry or tombstone is
   * there; an entry that would read as a miss at once removes what is stored instead.
   * @returns `false` when the guard refused the write, else `true`
   * @throws an `E_STAMPEDE_BACKEND_ENCODE` error for a value the serializer refuses
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<boolean>;
  /** Replaces the entry with a tombstone holding Redis's own time, kept `tombstoneTtl`. */
  delete(key: string): Promise<void>;
  /** `value` through the serializer and back: what a later `get` returns for it. */
  roundTrip(value: unknown): unknown;
  /**
   * `SET NX PX` with a random token; `undefined` when another holder has the lock. Where the lock
   * lives with the values, the lock can `commit` (write, release and announce in one script).
   */
  tryAcquireFillLock(key: string, ttl: number): Promise<FillLock | undefined>;
  /**
   * The lock attempt and a read of the entry in one round trip: one script ({@link
   * LOCK_AND_READ_SCRIPT}) where the lock lives with the values, else `SET NX PX` on the lock client
   * and the read on the value client in parallel. A read that fails there is reported and taken as a
   * miss (the lock attempt stands).
   */
  tryAcquireFillLockAndRead(key: string, ttl: number): Promise<FillLockAttempt>;
  /**
   * What a message of a key's `:done` channel says: the outcome, and the entry it carries
   * (`filled|<holder token>|<stored text>`, from a commit) on this process's clock, or `undefined`
   * for a message that is not an announcement. An entry that cannot be decoded (or a server clock
   * not measured yet) is left out: the waiter reads the key.
   */
  decodeAnnouncement(
    message: unknown,
  ): { readonly outcome: FillOutcome; readonly announced?: FillAnnouncement | undefined } | undefined;
  /**
   * Records Redis's time as the invalidation time of each tag (one key per tag, never a scan),
   * or the date of a `setValue` of the tag made later in the same millisecond when that is later:
   * entries carrying one of them created at or before it read as misses from then on.
   */
  invalidateTags(tags: readonly string[]): Promise<void>;
  /**
   * False once Redis refused a script (see `ServerAccess.scripts`): a lock could not be released, so
   * a binding then reports no fill lock (`tryAcquireFillLock` undefined) and the core protects
   * in-process only, instead of making every herd wait out `lockWaitTimeout`.
   */
  readonly lockUsable: boolean;
  /**
   * Prepares for the first herd in the background, so that it runs like a warm one: loads every
   * script on its server (`SCRIPT LOAD`, where the client can), measures the server clock, checks
   * that the lock client may run scripts and reads the eviction policy of the lock's and the values'
   * servers (one warning when they can evict a lock, or a tag's record or a tombstone before the
   * values it invalidates). Never rejects; the first fault (other than a refusal of SCRIPT LOAD or CONFIG)
   * is reported once as a `backend-error` with operation `'warm-up'`.
   */
  warmUp(): Promise<void>;
  /**
   * A lighter start than {@link warmUp}, for a binding whose commands are billed one by one
   * (Upstash): sets up Web Crypto and starts the server clock's first measurement, a command the
   * first read would send anyway, so the client's code, its connection and the clock are ready
   * before the first herd at no extra command. Never throws; a fault is left to the first read's
   * measurement, which tries again.
   */
  prime(): void;
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
  const slowReads = createSlowReadWatch(operations.name, operations.operationTimeout);
  // The server's time as this process estimates it (its own clock before a measurement): what a
  // delete or a tag invalidation records when the user may not run TIME.
  // Never behind the server's, so a fill that started before the delete is still refused.
  const serverNow = (): string => String(Math.round(Date.now() + (clock.ceiling ?? 0)));

  // In a Cluster, the read script may touch the tags' keys only when they share the entry's slot.
  // So may the write script, which dates a tagged `setValue` past its tags' invalidations of the
  // same millisecond: apart, it dates it by `TIME` alone (see WRITE_GUARD_LUA).
  const tagsApart = client.cluster === true && !prefixPinsSlot(prefix);
  const tagPrefix = tagsApart ? '' : prefix;
  // One round trip, tagged or not: the script compares the entry's tags on the server. A server
  // that cannot compile the script's flags (before Redis 7) gets it without them from then on.
  let getScript = GET_SCRIPT;
  const read = async (key: string): Promise<unknown> => {
    const keys = [remoteKeys(prefix, key).value];
    try {
      return await runScript(getScript, keys, [prefix]);
    } catch (error) {
      // A user whose ACL refuses scripts still reads what others wrote (the runner turned
      // `access.scripts` off on this refusal): this read and the next ones go apart.
      if (!context.access.scripts) return readApart(key);
      if (getScript !== GET_SCRIPT || !FLAGS_REFUSED.test(messageOf(error))) throw error;
      getScript = GET_SCRIPT_WITHOUT_FLAGS;
      return runScript(getScript, keys, [prefix]);
    }
  };
  // Cluster without a slot-pinning prefix, or no scripts allowed: GET, then (only for a tagged
  // entry) its tags' keys.
  const readApart = async (key: string): Promise<unknown> =>
    checkTagsApart(await client.get(remoteKeys(prefix, key).value));
  // `stored` unless it is a tagged entry one of whose tags was invalidated since (then `null`).
  const checkTagsApart = async (stored: unknown): Promise<unknown> => {
    const header = typeof stored === 'string' ? TAGGED_HEADER.exec(stored) : null;
    if (header === null) return stored;
    const createdAt = Number(header[1] ?? header[2]);
    const tags = (header[3] ?? '').split(',').filter((tag) => tag.length !== 0);
    const times = await Promise.all(tags.map((tag) => client.get(`${prefix}{${tag}}:tag`)));
    return times.some((at) => at !== null && at !== undefined && Number(at) >= createdAt) ? null : stored;
  };

  // The stored text of `key` as an entry on this process's clock; an undecodable one is reported
  // and read as a miss.
  const undecodable = createUndecodableWatch(operations.name);
  const decode = (key: string, stored: unknown, offset: number): CacheEntry | undefined => {
    try {
      const entry = decodeStored(stored, serializer, offset);
      if (stored !== null && stored !== undefined) undecodable.decoded(key);
      return entry;
    } catch (cause) {
      const error = createError(
        'E_STAMPEDE_BACKEND_DECODE',
        `cannot decode the entry of '${key}' (read as a miss): ${messageOf(cause)}`,
        { key, cause },
      );
      operations.report('decode', key, error);
      undecodable.undecodable(key, error);
      return undefined;
    }
  };
  // The write guard's arguments for `entry`, its times on the server's clock `offset`.
  const encodeWrite = (
    key: string,
    entry: CacheEntry,
    { ttl, direct, renews }: CacheSetOptions,
    offset: number,
  ): WriteGuardArgs => {
    try {
      const atLeast = direct === true || renews !== undefined ? undefined : datedAfter(key, entry);
      return remoteWriteArgs(entry, ttl, { serializer, offset, tombstoneTtl, direct, renews, atLeast });
    } catch (cause) {
      const error = createError(
        'E_STAMPEDE_BACKEND_ENCODE',
        `cannot serialise the value of '${key}' (not stored): ${messageOf(cause)}`,
        { key, cause },
      );
      operations.unserialisable(key, error);
      throw error;
    }
  };
  // Once the clock is measured the arguments are ready in the same tick, so the write goes out
  // before the fill's callers resume (no microtask turns between a fill's end and its command).
  // This process's own deletes and tag invalidations, by `k<key>` / `t<tag>`: the earliest server
  // time a fill that started after one resolved may be dated (the tombstone's time, a tie the write
  // wins; just past a tag's record), and when it resolved here. A fill's times move by an estimate
  // some 2 ms behind the server's clock (`clock.floor`), so a refill made at once after this
  // process's own invalidation would read as older than it, and be lost (a warm-up, 47 of 50 runs).
  // It started after the change had been made on the server, so dating it there is never ahead of it.
  // Kept a minute, oldest dropped first.
  const changes = new Map<string, { readonly server: number; readonly resolvedAt: number }>();
  const noteChange = (name: string, server: unknown): void => {
    if (typeof server !== 'number' || !Number.isFinite(server)) return;
    const resolvedAt = Date.now();
    changes.delete(name);
    changes.set(name, { server, resolvedAt });
    for (const [old, change] of changes) {
      if (resolvedAt - change.resolvedAt < CHANGE_MEMORY_MS) break;
      changes.delete(old);
    }
  };
  // The earliest server time a fill's `entry` may carry, or undefined: the latest of this process's
  // changes of its key or tags that had resolved when its fill started.
  const datedAfter = (key: string, entry: CacheEntry): number | undefined => {
    if (changes.size === 0) return undefined;
    let earliest: number | undefined;
    const consider = (change: { readonly server: number; readonly resolvedAt: number } | undefined) => {
      if (
        change !== undefined &&
        entry.createdAt >= change.resolvedAt &&
        !(earliest !== undefined && earliest >= change.server)
      )
        earliest = change.server;
    };
    consider(changes.get(`k${key}`));
    if (entry.tags !== undefined) for (const tag of entry.tags) consider(changes.get(`t${tag}`));
    return earliest;
  };
  const writeArgs = (
    key: string,
    entry: CacheEntry,
    options: CacheSetOptions,
  ): MaybePromise<WriteGuardArgs> => {
    const offset = clock.current();
    return typeof offset === 'number'
      ? encodeWrite(key, entry, options, writeOffset(entry, options, offset))
      : offset.then((measured) => encodeWrite(key, entry, options, writeOffset(entry, options, measured)));
  };
  // Two replicas' estimates of the server's clock differ by up to what each has proven (about a
  // round trip plus a millisecond of Date.now()'s resolution, either way): a fill that started just
  // before a `setValue` on another replica could be stamped after it, and replace it. A fill's
  // times move by an offset never ahead of the server, so it never passes for newer than it is.
  // Everything else moves by the estimate reads use: a `setValue` (which replaces whatever is
  // stored anyway) stamped ahead would read, for a few ms, as written after calls that started
  // before it (a lock winner's double-check takes such a value for another replica's fill), and a
  // re-arm must tie with the entry it renews as this process read it.
  // A tagged `setValue` is dated by the write script itself (Redis's `TIME`, see WRITE_GUARD_LUA),
  // so that a tag invalidation made after it resolved always covers it: the estimate is only what
  // the script falls back to when `TIME` is refused, and there it must not run ahead of the server
  // either (an invalidation then records an estimate never behind it, `clock.ceiling`).
  const writeOffset = (entry: CacheEntry, options: CacheSetOptions, measured: number): number =>
    (options.direct === true && entry.tags === undefined) || options.renews !== undefined
      ? measured
      : (clock.floor ?? measured);
  // A lock on the value client can commit; on a separate lock client the write and the release go
  // to two servers, one after the other. A commit's entry and options come from its caller: they are
  // checked before anything is sent (the commit rejects, and `release` stays usable).
  const writer: FillLockWriter | undefined =
    context.lockClient === client
      ? {
          args: (key, entry, options) => {
            checkCacheWrite(entry, options);
            return writeArgs(key, entry, options);
          },
          tagPrefix,
        }
      : undefined;

  const get = async (key: string): Promise<CacheEntry | undefined> => {
    checkCacheKey(key);
    // Started before the GET so that, on first use, both travel together.
    const offset = clock.current();
    const sentAt = Date.now();
    const sentConnected = client.connected?.() ?? true;
    const stored = await operations.call(
      'get',
      key,
      () => (tagsApart || !context.access.scripts ? readApart(key) : read(key)),
      // A read that waited out an outage (sent, or answered, while the connection was down) says
      // nothing about the value's size: it ends the key's streak instead.
      (late) =>
        sentConnected && (client.connected?.() ?? true)
          ? slowReads.late(key, late, Date.now() - sentAt)
          : slowReads.answered(key),
    );
    slowReads.answered(key);
    return decode(key, stored, await offset);
  };

  return {
    get,
    async set(key, entry, options) {
      checkCacheKey(key);
      checkCacheWrite(entry, options);
      const ready = writeArgs(key, entry, options);
      const args = 'then' in ready ? await ready : ready;
      const { text, createdAt, px } = args;
      const wrote = await operations.keepAlive(
        operations.call('set', key, () =>
          runScript(
            WRITE_SCRIPT,
            [remoteKeys(prefix, key).value],
            [text, createdAt, px, args.direct ?? '', tagPrefix],
          ),
        ),
      );
      // The script answers 0 when it refused the write (a newer entry or tombstone is there).
      return !(wrote === 0 || wrote === '0');
    },
    async delete(key) {
      checkCacheKey(key);
      const names = remoteKeys(prefix, key);
      // Where the locks live with the values, the tombstone lives as long as a fill's lock.
      const keys = writer === undefined ? [names.value] : [names.value, names.lock];
      const reply = await operations.keepAlive(
        operations.call('delete', key, () =>
          runScript(DELETE_SCRIPT, keys, [pxArgument(tombstoneTtl), serverNow()]),
        ),
      );
      // Deleted, but the script could not read the lock's TTL: see DELETE_LUA.
      if (typeof reply === 'string') context.access.auxiliaryFailed('PTTL', new Error(reply));
      else noteChange(`k${key}`, reply);
    },
    roundTrip(value) {
      return roundTripValue(value, serializer);
    },
    tryAcquireFillLock(key, ttl) {
      try {
        checkLockArguments(key, ttl);
      } catch (error) {
        return Promise.reject(error);
      }
      return acquireFillLock(context, key, ttl, writer);
    },
    async tryAcquireFillLockAndRead(key, ttl) {
      // Before the two-server path's `get`, which would report a bad key as a read fault.
      checkLockArguments(key, ttl);
      if (writer === undefined) {
        // Two servers: the lock and the read travel in parallel (one round-trip time).
        const [lock, entry] = await Promise.all([
          acquireFillLock(context, key, ttl),
          get(key).catch((error: unknown) => {
            operations.report('get', key, error);
            return undefined;
          }),
        ]);
        return { lock, entry };
      }
      const offset = clock.current();
      const { lock, holder, stored } = await acquireFillLockAndRead(
        context,
        key,
        ttl,
        LOCK_AND_READ_SCRIPT,
        writer,
      );
      // In a Cluster whose prefix does not pin the slot, the script could not read a tagged entry's
      // tags: they are read apart (a tagged entry only).
      const visible = tagsApart ? await checkTagsApart(stored) : stored;
      return { lock, entry: decode(key, visible, await offset), holder };
    },
    decodeAnnouncement(message) {
      if (message === 'filled' || message === 'failed') return { outcome: message };
      if (typeof message !== 'string' || !message.startsWith(ANNOUNCED_PREFIX)) return undefined;
      const end = message.indexOf('|', ANNOUNCED_PREFIX.length);
      if (end === -1) return { outcome: 'filled' };
      const holder = message.slice(ANNOUNCED_PREFIX.length, end);
      const offset = clock.offset;
      if (offset === undefined) return { outcome: 'filled' };
      let entry: CacheEntry | undefined;
      try {
        entry = decodeStored(message.slice(end + 1), serializer, offset);
      } catch {
        // Read by the waiter instead, which reports it if it still cannot be decoded.
        entry = undefined;
      }
      return { outcome: 'filled', announced: { holder, entry } };
    },
    async invalidateTags(tags) {
      // A string would be invalidated character by character; an empty tag names the key `{}:tag`.
      checkTagList(tags);
      // One script per tag: a tag's key is in its own slot in a Cluster (a few parallel calls),
      // with its stamp key (same slot): the record covers a `setValue` dated past Redis's time.
      const records = await operations.keepAlive(
        Promise.all(
          tags.map((tag) =>
            operations.call('tags', undefined, () =>
              runScript(
                INVALIDATE_TAGS_SCRIPT,
                [tagKey(prefix, tag), tagStampKey(prefix, tag)],
                [serverNow()],
              ),
            ),
          ),
        ),
      );
      // Read as invalidated at or after its record: a later fill is dated a millisecond past it.
      tags.forEach((tag, i) => {
        const record = Number(records[i]);
        if (Number.isFinite(record)) noteChange(`t${tag}`, record + 1);
      });
    },
    get lockUsable() {
      return context.access.scripts;
    },
    prime() {
      setUpRandomTokens();
      void clock.current();
    },
    warmUp() {
      return warmUp(context, () => clock.current());
    },
  };
}

/** A lock attempt's key and TTL. */
function checkLockArguments(key: unknown, ttl: unknown): void {
  checkCacheKey(key);
  checkLockTtl(ttl);
}

// The header of a tagged envelope (`s1t|` or `s2t|`, with a `delta`): its createdAt (server clock)
// and its encoded tags.
// How long this process remembers its own deletes and tag invalidations for dating its fills.
const CHANGE_MEMORY_MS = 60_000;
const TAGGED_HEADER = /^(?:s1t\|(-?\d+)\|\d*\|\d*\||s2t\|(-?\d+)\|\d*\|\d*\|\d+\|)([^|]*)\|/;

// Every read runs GET_SCRIPT (see `read`), so it is loaded with the writes' scripts.
const VALUE_SCRIPTS: readonly LuaScript[] = [GET_SCRIPT, WRITE_SCRIPT, DELETE_SCRIPT, TIME_SCRIPT];
// Where the lock lives with the values: its attempt reads, and its commit writes.
const COMBINED_SCRIPTS: readonly LuaScript[] = [LOCK_AND_READ_SCRIPT, COMMIT_SCRIPT];
// A server before Redis 7 cannot compile GET_SCRIPT's flags: not a fault (reads then send it
// without them).
const FLAGS_REFUSED = /compil|shebang|unexpected symbol/i;
const LOCK_SCRIPTS: readonly LuaScript[] = [RELEASE_SCRIPT, EXTEND_SCRIPT];

/**
 * Every lock attempt draws a random token. The runtime sets up Web Crypto on its first use (on Node
 * 20 about 1 ms of module loading, several on a busy machine), which would otherwise fall between
 * the first herd's read and its SET NX, on every replica.
 */
function setUpRandomTokens(): void {
  try {
    randomToken();
  } catch {
    // No Web Crypto: the first lock attempt reports it.
  }
}

/** See {@link RedisProtocolCache.warmUp}; `measureClock` starts the server clock's first measurement. */
async function warmUp(context: RedisProtocolContext, measureClock: () => unknown): Promise<void> {
  const { client, lockClient, operations, runLockScript } = context;
  setUpRandomTokens();
  const separate = lockClient !== client;
  let reported = false;
  const report = (error: unknown): void => {
    if (reported || isRefusal(error) || FLAGS_REFUSED.test(messageOf(error))) return;
    reported = true;
    operations.report('warm-up', undefined, error);
  };
  const load = (target: RedisProtocolClient, scripts: readonly LuaScript[]): Promise<unknown>[] => {
    const scriptLoad = target.scriptLoad;
    if (scriptLoad === undefined) return [];
    return scripts.map((script) =>
      operations.call('script load', undefined, () => scriptLoad.call(target, script.source)).catch(report),
    );
  };
  // Sent in this order on each connection, so the EVALSHAs below find their scripts loaded.
  const loaded = [
    ...load(client, separate ? VALUE_SCRIPTS : [...VALUE_SCRIPTS, ...COMBINED_SCRIPTS, ...LOCK_SCRIPTS]),
    ...(separate ? load(lockClient, [...LOCK_SCRIPTS, TIME_SCRIPT]) : []),
  ];
  // The clock's first measurement runs a script on the value client: a refusal shows here, before
  // the first lock is taken. The lock client, when separate, is asked the same way.
  const probes: Promise<unknown>[] = [Promise.resolve(measureClock())];
  if (separate) {
    probes.push(
      // A refusal turns scripting off in the runner (`ServerAccess`); it is not a fault to report.
      operations.call('time', undefined, () => runLockScript(TIME_SCRIPT, [], [])).catch(report),
    );
  }
  await Promise.all([
    ...loaded,
    ...probes,
    checkEvictionPolicy(lockClient, operations.name, separate, client),
  ]);
}

// A refused SCRIPT LOAD or CONFIG is the user's choice: scripts still run by EVAL, and the eviction
// policy is left unchecked. A refused script is warned about by `ServerAccess`.
function isRefusal(error: unknown): boolean {
  const message = error instanceof Error ? error.message : '';
  return /\bNOPERM\b|user executing the script can't|unknown command/i.test(message);
}
