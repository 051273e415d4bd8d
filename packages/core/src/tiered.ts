import { isPendingRead, isThenable } from './backend.js';
import type {
  Cache,
  CacheBus,
  CacheEntry,
  CacheSetOptions,
  FillLock,
  FillLockAttempt,
  MaybePromise,
} from './cache.js';
import {
  checkCacheKey,
  checkCacheWrite,
  checkFillDoneArguments,
  checkLockTtl,
  checkTagList,
} from './cache-arguments.js';
import { stillBefore } from './clock.js';
import { type Duration, toPositiveMilliseconds } from './duration.js';
import { changeEntry } from './entry.js';
import { decodeTag, encodeTag } from './envelope.js';
import { BUS_ERROR_CODE, CacheBusError, checkKnownKeys, kindOf, messageOf } from './errors.js';
import { emit, hasListeners } from './events.js';
import { hasWork, idleTimeout, type WhenIdleOptions, whenIdle } from './idle.js';
import { type CacheState, existingState } from './registry.js';
import {
  ANSWERED_BY_L1,
  ANSWERED_BY_L2,
  ANSWERED_BY_NEITHER,
  LOCAL_TIER_KEY,
  STATE_KEY,
  shared,
  TIER_ANSWERS_KEY,
  type TierAnswers,
} from './shared.js';
import { countersFor, reportBackendError } from './stats.js';
import { supersedeTagged } from './tags.js';
import { supersedeFlights } from './values.js';

/** Options of {@link createTieredCache}. */
export interface TieredCacheOptions {
  /**
   * The in-process cache in front (L1), normally `createMemoryCache()`. Give it to this tiered cache
   * alone: it holds copies of the remote's entries, and is cleared when the bus reconnects. One that
   * is the L1 of another tiered cache not closed yet is a `TypeError`.
   */
  local: Cache;
  /**
   * The shared cache behind (L2): Redis, node-redis, Upstash. Its `bus`, when it has one, keeps every
   * replica's L1 coherent; its fill lock and push wake-up are this cache's.
   */
  remote: Cache;
  /** The cache's name in stats, events and metric labels. @default 'tiered' */
  name?: string | undefined;
  /**
   * The longest an L1 copy is served after it came from (or was written to) the remote cache: the
   * bound on how stale a replica can be when a bus message is lost, or when the remote has no bus
   * (then it is the only bound). Exact to the millisecond: the copy's freshness is cut to it, so a
   * read past it asks the remote (the local cache may keep the copy's memory a little longer:
   * `@stampede/memory` reads the clock for expiry once a second). An L1 copy never outlives the
   * entry's own freshness and grace either. Only tiered caches publish on the bus: a write made
   * through a plain remote cache on the same prefix is bounded by this alone.
   * @default 60000 (1 minute)
   */
  localTtl?: Duration | undefined;
}

/** A {@link Cache} made of a local cache in front of a remote one (see {@link createTieredCache}). */
export interface TieredCache extends Cache {
  readonly name: string;
  /** The local cache (L1) given in the options. */
  readonly local: Cache;
  /** The remote cache (L2) given in the options. */
  readonly remote: Cache;
  /**
   * A fresh L1 entry synchronously (no remote command); otherwise the remote's entry, kept in L1.
   * When the remote read fails, an L1 copy still within its grace is returned instead. While the
   * bus has lost its subscription, every read asks the remote (L1 answers only when it fails).
   * A `key` that is not a non-empty string is a `TypeError`, as a rejected promise (a miss may answer
   * with a promise, so a caller handles one either way).
   */
  get(key: string): MaybePromise<CacheEntry | undefined>;
  /**
   * Writes the remote cache, then L1 (the never-older rule applies on both), then tells the other
   * replicas to evict the key. Resolves `false` when the remote refused the write (the L1 copy is
   * dropped then). When the remote write fails, L1 is written anyway and the error is rethrown. A
   * direct write (`setValue`) the remote took whose bus message cannot be published rejects with a
   * `CacheBusError` (`code` `'E_STAMPEDE_BUS_UNHEARD'`); a fill's write never fails for the bus.
   * Rejects with a `TypeError` naming the argument, writing nothing, when `key` is not a non-empty
   * string, `entry` not a `CacheEntry` or `options` not a `CacheSetOptions` object.
   */
  set(key: string, entry: CacheEntry, options: CacheSetOptions): Promise<boolean>;
  /**
   * Deletes from the remote cache, then from L1, then tells the other replicas to evict the key;
   * rejects with a `CacheBusError` (`code` `'E_STAMPEDE_BUS_UNHEARD'`) when the remote deleted it
   * but the bus message cannot be published. Rejects with a `TypeError`, deleting nothing, when
   * `key` is not a non-empty string.
   */
  delete(key: string): Promise<void>;
  /**
   * Present when the remote has `invalidateTags` (Redis, node-redis, Upstash): invalidates the tags
   * in the remote cache, then in L1, then tells the other replicas to invalidate them in their L1
   * (a local cache without `invalidateTags` is cleared instead). Rejects, invalidating nothing
   * locally, when the remote fails; rejects with a `CacheBusError` (`code`
   * `'E_STAMPEDE_BUS_UNHEARD'`), the remote and L1 invalidated, when the bus message cannot be
   * published. Call it through `invalidateTag(s)`, which also stops this process's fills in flight
   * for tagged values from being written. Rejects with a `TypeError`, invalidating nothing, when
   * `tags` is not an array of non-empty strings.
   */
  invalidateTags?: ((tags: readonly string[]) => Promise<void>) | undefined;
  /**
   * Waits for this process's work on the tiered cache (fills, background refreshes and their
   * writes; see `whenIdle`) at most `options.timeout` (default `'5s'`), then stops listening on the
   * remote's bus, empties `local` of its copies and frees it for another tiered cache (at once when
   * nothing runs). From then on the tiered cache is its remote alone: calls still answer, from the
   * remote, and nothing (not even a fill that outlived the timeout) reads or writes `local` again.
   * Closes neither `local` nor `remote` (you own them): close the remote after this.
   *
   * @throws TypeError / RangeError (as a rejection) when `options.timeout` is not a duration
   */
  close(options?: WhenIdleOptions): Promise<void>;
}

/**
 * A local cache that can drop everything at once (the memory adapter can), and may take the time of
 * a tag invalidation (the memory adapter's second argument; the time it learnt of it).
 */
type Clearable = Cache & {
  clear?: (() => MaybePromise<void>) | undefined;
  invalidateTags?: ((tags: readonly string[], at?: number) => MaybePromise<void>) | undefined;
};

/** A remote read or write in flight. */
interface Pending {
  /**
   * Set (never cleared) when the key is evicted while it runs, L1 is cleared, or the bus is lost or
   * recovers: its result may predate a change, so it is not kept in L1.
   */
  evicted: boolean;
  /** Tags invalidated while it ran: an entry carrying one of them is not kept in L1. */
  tags?: Set<string>;
}

/** Whether `entry` carries a tag invalidated while `token`'s read or write ran. */
function invalidatedDuring(token: Pending, entry: CacheEntry): boolean {
  const invalidated = token.tags;
  if (invalidated === undefined) return false;
  return entry.tags?.some((tag) => invalidated.has(tag)) === true;
}

/**
 * Bus message kinds: `k` evicts one key (`<origin>|k|<key>`, the key as `encodeTag` writes a tag,
 * so that no message has a line break in it: Upstash's pub/sub is a line-based stream); `t`
 * invalidates tags in L1 (`<origin>|t|<tag>,<tag>`, each tag as `encodeTag` writes it, so neither
 * `|` nor `,` appears in one); `a` acknowledges a message (`<origin>|a|<sender>|<receiver>`). A
 * sender that waits for acknowledgements writes `<origin>.<sequence>` as its origin, and every
 * replica that has applied the message answers with an `a` naming that sender and the receiver it
 * heard it through (the bus's id of its connection, see `CacheBusHandlers.subscribed`): the sender
 * counts receivers, as the bus's publish does (a replica of an older version compares the whole
 * field with its own origin, so it still applies the message; it only does not answer).
 * Unknown kinds are ignored (newer replicas may add some).
 */
const EVICT_KEY = 'k';
const INVALIDATE_TAGS = 't';
const ACKNOWLEDGE = 'a';
/**
 * How long an invalidation (`invalidate`, `invalidateTag(s)`, `setValue`) waits for the other
 * replicas to acknowledge its bus message, at most: a replica that has gone without its connection
 * being closed yet (or one of an older version, which does not answer) delays it this long.
 */
export const BUS_ACK_TIMEOUT_MS = 1_000;
export { BUS_ERROR_CODE };

function checkCache(value: unknown, name: string): asserts value is Cache {
  if (typeof value !== 'object' || value === null) {
    throw new TypeError(`${name} must be a Cache object; got ${kindOf(value)}`);
  }
  for (const method of ['get', 'set', 'delete'] as const) {
    if (typeof (value as Partial<Cache>)[method] !== 'function') {
      throw new TypeError(`${name} must implement the Cache interface: ${name}.${method} is not a function`);
    }
  }
}

function checkBus(bus: unknown): asserts bus is CacheBus | undefined {
  if (bus === undefined) return;
  const candidate = bus as Partial<CacheBus> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.publish !== 'function' ||
    typeof candidate.subscribe !== 'function'
  ) {
    throw new TypeError('options.remote.bus must have publish and subscribe functions when present');
  }
}

// Tells this instance's messages from other replicas'. Not a secret: Math.random suffices, and it is
// available on every runtime.
function originId(): string {
  return `${Math.random().toString(36).slice(2, 10)}${Math.random().toString(36).slice(2, 10)}`;
}

const TIERED_OPTIONS: ReadonlySet<string> = new Set(['local', 'remote', 'name', 'localTtl']);

/**
 * A cache made of an in-process cache (L1) in front of a shared remote cache (L2). An L1 hit costs no
 * remote command and stays a synchronous read, so `getOrCompute`'s hit path applies to it. An L1 miss
 * reads the remote and keeps the entry in L1 for at most `localTtl`; L1 serves it as a hit within
 * the entry's freshness (cut to `localTtl`) and grace only. Writes go to the remote, then to L1.
 *
 * With a remote that has an invalidation bus (`@stampede/redis`, `@stampede/node-redis` and
 * `@stampede/upstash` do), every write and delete, and so every `setValue`, `invalidate` and fill,
 * evicts the key from the other replicas' L1 (they read the remote again when next asked, they do
 * not re-read on the message). From the moment the bus reports its subscription lost until it is
 * back, L1 serves no hit: every read asks the remote, and an L1 copy answers only when the remote
 * fails (L2 down); what was in flight at the loss, and fills begun before it or before the
 * recovery, leave no L1 copy. (Until the client notices its subscriber connection is gone, which
 * for a killed connection is milliseconds but for a silent network partition may take until TCP
 * gives up, L1 serves as usual: `localTtl` bounds that window.) After the bus reconnects, L1 is
 * cleared (messages may have been missed), counted in `busRecoveries` and emitted as a
 * `bus-recovery` event. Without a bus, a replica may serve an L1 copy up to `localTtl` after
 * another replica changed it.
 *
 * `invalidate`, `invalidateTag(s)` and `setValue` resolve once every other replica that received
 * their message has applied it (each answers on the bus; Redis's `PUBLISH` says how many received
 * it): after they resolve, no live replica serves the old L1 copy. One that does not answer (gone
 * without its connection closed yet, or of an older version) delays the call
 * 1 s at most, as does this replica's own lost subscription (it cannot hear the answers). A fill's
 * write does not wait. Where this replica does not hear the bus (Cloudflare Workers), or the bus
 * does not count receivers, they resolve once the message is published. When the message cannot
 * be published (the bus's connection down or timing out), they reject with a `CacheBusError`
 * (`code` `'E_STAMPEDE_BUS_UNHEARD'`, `cause` the publish's error) after the remote and this replica's
 * L1 were changed: the other replicas may serve their copies until `localTtl`, so repeat the call.
 *
 * With a remote that can invalidate tags, so can the tiered cache: `invalidateTag(s)` invalidates
 * them in the remote, then in L1, then publishes them on the bus, and every other replica
 * invalidates them in its L1 (which checks an entry's tags on read: an L1 hit stays free of remote
 * commands). A tag message counts in `busEvictions` like a key's; `tagInvalidations` counts only the
 * tags invalidated by calls on this replica.
 *
 * The fill lock, push wake-up and serializer round trip are the remote's. When the remote is down,
 * fresh L1 entries are still served (once the remote read has failed, when the bus is lost with
 * it, as a Redis that stops takes both), stale ones within their grace serve stale-while-revalidate,
 * misses fill locally (their writes still land in L1), and with `failSafe` an L1 copy past its grace
 * (within `localTtl` and `maxStale`) is the fallback of a fill that fails.
 *
 * @throws TypeError when `local` or `remote` is not a Cache, `local` is already the L1 of a tiered
 *   cache not closed yet, or `name` is not a non-empty string
 * @throws RangeError when `localTtl` is not a duration of at least 1 ms
 * @example
 * const cache = createTieredCache({
 *   local: createMemoryCache({ max: 10_000 }),
 *   remote: createRedisCache({ client: new Redis(process.env.REDIS_URL) }),
 *   localTtl: '30s',
 * });
 * const count = await getOrCompute(cache, 'bookmark_count', '5m', countBookmarks);
 */
export function createTieredCache(options: TieredCacheOptions): TieredCache {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  checkKnownKeys(options, TIERED_OPTIONS, 'options');
  const { local, remote, name = 'tiered', localTtl: localTtlOption = 60_000 } = options;
  checkCache(local, 'options.local');
  checkCache(remote, 'options.remote');
  if (local === remote) throw new TypeError('options.local and options.remote must be different caches');
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError('options.name must be a non-empty string');
  }
  const localTtl = toPositiveMilliseconds(localTtlOption, 'options.localTtl');
  const bus = remote.bus;
  checkBus(bus);
  // Keys are the caller's, unprefixed, in L1: a second tiered cache on the same L1 (another remote,
  // another tenant) would be answered with the first one's values for the same key.
  shared.localTiers ??= new WeakMap();
  const localTiers = shared.localTiers;
  const owner = localTiers.get(local);
  if (owner !== undefined) {
    throw new TypeError(
      `options.local is already the local cache of tiered cache '${owner.name}': give each tiered cache a local cache of its own (close() that one first, and await it while it has fills in flight, to reuse it)`,
    );
  }

  const counters = countersFor(name);
  const origin = originId();
  const clearable = local as Clearable;
  // A local cache without `clear` has its keys tracked instead, so a bus recovery can drop them.
  const tracked = typeof clearable.clear === 'function' ? undefined : new Set<string>();
  // Set once `close()` has freed `local`: from then on this cache is its remote alone. It neither
  // reads nor writes `local` (which another tiered cache may have taken over, for another remote),
  // and without its bus subscription an L1 copy could not be kept coherent anyway.
  let closed = false;
  // The tiered cache itself, once made (bus messages reach the core's state of it through this).
  let self: Cache | undefined;
  // Remote reads and writes in flight, by key: an eviction meanwhile marks them, and their result is
  // then not kept in L1 (it may predate the change the eviction announced).
  const pending = new Map<string, Set<Pending>>();

  const begin = (key: string): Pending => {
    const token: Pending = { evicted: false };
    const set = pending.get(key);
    if (set === undefined) pending.set(key, new Set([token]));
    else set.add(token);
    return token;
  };
  const end = (key: string, token: Pending): void => {
    const set = pending.get(key);
    if (set === undefined) return;
    set.delete(token);
    if (set.size === 0) pending.delete(key);
  };

  // Local faults are the local cache's own business: a copy that cannot be dropped or written is a
  // reported fault, never a failed call (the remote answer still stands).
  // Returns a promise when the local cache answered with one (settled once it has, never rejected).
  const settleLocal = (key: string, operation: 'set' | 'delete', run: () => unknown): unknown => {
    try {
      const done = run();
      if (isThenable(done)) {
        return Promise.resolve(done).then(undefined, (error: unknown) =>
          reportBackendError(name, operation, key, error),
        );
      }
    } catch (error) {
      reportBackendError(name, operation, key, error);
    }
    return undefined;
  };
  const evictLocal = (key: string): unknown => {
    const set = pending.get(key);
    if (set !== undefined) for (const token of set) token.evicted = true;
    if (closed) return undefined;
    tracked?.delete(key);
    return settleLocal(key, 'delete', () => local.delete(key));
  };
  // `replace`: the remote stored `entry`, so L1 takes it even over a copy that looks newer (a copy
  // of a tagged entry carries its read's start as `createdAt`, see `readRemote`).
  const keepLocal = (
    key: string,
    entry: CacheEntry,
    ttl: number,
    direct: boolean | undefined,
    replace = false,
  ): void => {
    if (closed) return;
    tracked?.add(key);
    const write = () => local.set(key, entry, { ttl, direct });
    settleLocal(key, 'set', () => {
      const stored = write();
      if (!replace) return stored;
      const again = (answer: unknown): unknown => {
        if (answer !== false) return answer;
        const dropped = local.delete(key);
        return isThenable(dropped) ? Promise.resolve(dropped).then(write) : write();
      };
      return isThenable(stored) ? Promise.resolve(stored).then(again) : again(stored);
    });
  };
  const clearLocal = (): void => {
    for (const set of pending.values()) for (const token of set) token.evicted = true;
    if (tracked === undefined) {
      try {
        const done = clearable.clear?.();
        if (isThenable(done)) {
          Promise.resolve(done).then(undefined, (error: unknown) =>
            reportBackendError(name, 'delete', undefined, error),
          );
        }
      } catch (error) {
        reportBackendError(name, 'delete', undefined, error);
      }
      return;
    }
    for (const key of [...tracked]) evictLocal(key);
  };

  // Resolves with the bus's answer (how many received the message, when it tells), or with the
  // failure (reported here, counted once) when the message could not be published.
  const publish = async (
    message: string,
    key: string | undefined,
  ): Promise<{ readonly receivers: unknown } | { readonly failure: unknown }> => {
    if (bus === undefined) return { receivers: undefined };
    try {
      return { receivers: await bus.publish(message) };
    } catch (error) {
      reportBackendError(name, 'publish', key, error);
      return { failure: error };
    }
  };
  // Messages of this replica waiting for acknowledgements, by the origin field they were sent with:
  // the receivers (see `receiver`) heard from so far, and how many the publish reached.
  const awaiting = new Map<string, { heard: Set<string>; expected: number; done: () => void }>();
  // The receiving end this cache hears the bus through, as the bus counts receivers: the id its
  // `subscribed` gave (one connection shared by several subscribers, as a Redis cache's, gives them
  // one id), else this cache's own origin (a subscriber that is a receiver of its own). An
  // acknowledgement names it, so that the publisher counts each receiver once, whatever number of
  // tiered caches answer behind it, and none behind its own.
  let receiver = origin;
  let sequence = 0;
  // Publishes `<origin>|kind|body`. With `confirm` (the caller's own change, which the remote
  // accepted: `invalidate`, `invalidateTag(s)`, `setValue`), rejects when the message could not be
  // published (the other replicas' copies stay until `localTtl`: the caller must know), and
  // resolves once every other replica that received it has applied it (acknowledged), or after
  // BUS_ACK_TIMEOUT_MS. It waits when the backend tells how many subscribers received the message
  // (Redis's PUBLISH does; this replica's own subscriber is one while it listens). A replica that has
  // lost its subscription cannot hear the acknowledgements: it waits BUS_ACK_TIMEOUT_MS when the
  // message reached others, as for a replica that does not answer. One that has never listened
  // (Cloudflare Workers) resolves once the message is published. A fill's write never waits, and
  // never fails for the bus: its failure is counted, the other replicas' copies last `localTtl`.
  const send = async (
    kind: string,
    body: string,
    key: string | undefined,
    confirm: boolean,
  ): Promise<void> => {
    if (bus === undefined) return;
    if (!confirm || (!listening && !deaf)) {
      const published = await publish(`${origin}|${kind}|${body}`, key);
      if (confirm && 'failure' in published) throw unheardChange(kind, body, published.failure);
      return;
    }
    const sender = `${origin}.${(++sequence).toString(36)}`;
    let done!: () => void;
    const acknowledged = new Promise<void>((resolve) => {
      done = resolve;
    });
    // Registered before publishing: an acknowledgement may come before PUBLISH's answer.
    const waiter = { heard: new Set<string>(), expected: Number.POSITIVE_INFINITY, done };
    awaiting.set(sender, waiter);
    const counted = listening;
    try {
      const published = await publish(`${sender}|${kind}|${body}`, key);
      if ('failure' in published) throw unheardChange(kind, body, published.failure);
      const receivers = published.receivers;
      // A bus that does not count receivers, or a cache closed meanwhile: no wait.
      if (typeof receivers !== 'number' || closed) return;
      // This replica's own subscriber is among the receivers only while it listens.
      waiter.expected = counted && listening ? receivers - 1 : receivers;
      if (waiter.heard.size >= waiter.expected) return;
      const timer = setTimeout(done, BUS_ACK_TIMEOUT_MS);
      (timer as { unref?: () => void }).unref?.();
      await acknowledged;
      clearTimeout(timer);
    } finally {
      awaiting.delete(sender);
    }
  };
  // The rejection of a change the remote took but the other replicas were not told of.
  const unheardChange = (kind: string, body: string, cause: unknown): Error => {
    const what =
      kind === EVICT_KEY
        ? `key '${decodeTag(body)}'`
        : `tags ${body
            .split(',')
            .map((tag) => `'${decodeTag(tag)}'`)
            .join(', ')}`;
    return new CacheBusError(
      `tiered cache '${name}': the remote cache was changed (${what}), but the invalidation bus could not tell the other replicas (${messageOf(cause)}): their L1 copies may serve the old value for up to localTtl (${localTtl} ms). Repeat the call once the bus is back.`,
      { cause },
    );
  };
  const publishEviction = (key: string, confirm = false): Promise<void> =>
    send(EVICT_KEY, encodeTag(key), key, confirm);

  // L1 checks an entry's tags on read (the memory cache does). A local cache that cannot invalidate
  // tags is cleared instead: more misses, never an invalidated value served.
  // Returns a promise when the local cache answered with one (settled once it has, never rejected).
  const invalidateLocalTags = (tags: readonly string[]): unknown => {
    // Reads and writes in flight may carry an entry of these tags from before the invalidation
    // (which keys carry them is not known here): a result that carries one is not kept in L1. An L1
    // copy arriving in the very millisecond of the record could otherwise be dated after it and
    // outlive it. Results without these tags are kept as ever.
    for (const set of pending.values()) {
      for (const token of set) {
        token.tags ??= new Set();
        for (const tag of tags) token.tags.add(tag);
      }
    }
    if (closed) return undefined;
    if (typeof clearable.invalidateTags !== 'function') {
      clearLocal();
      return undefined;
    }
    try {
      const done = clearable.invalidateTags(tags, Date.now());
      if (isThenable(done)) {
        return Promise.resolve(done).then(undefined, (error: unknown) => {
          reportBackendError(name, 'tags', undefined, error);
          clearLocal();
        });
      }
    } catch (error) {
      reportBackendError(name, 'tags', undefined, error);
      clearLocal();
    }
    return undefined;
  };
  // Tells `sender` (a message's origin field with its sequence) that this replica has applied it.
  const acknowledge = (sender: string, applied: unknown): void => {
    const answer = (): void => {
      void publish(`${origin}|${ACKNOWLEDGE}|${sender}|${receiver}`, undefined);
    };
    if (isThenable(applied)) Promise.resolve(applied).then(answer);
    else answer();
  };

  // Another replica's change, heard before it resolves there: this process's fills and reads in
  // flight that began before it must answer no caller arriving from now on (a fill that answered
  // its callers stays joinable until its write lands; a read is shared by whoever arrives while it
  // runs). Their callers so far keep their answer: they came before the change.
  const supersedeHere = (apply: (state: CacheState) => void): void => {
    const state = self === undefined ? undefined : existingState(self);
    if (state !== undefined) apply(state);
  };
  const onMessage = (text: string): void => {
    const first = text.indexOf('|');
    const second = first === -1 ? -1 : text.indexOf('|', first + 1);
    if (second === -1) return;
    const sender = text.slice(0, first);
    const dot = sender.indexOf('.');
    // A replica never evicts on its own message: its local copy is the value it just wrote (or it
    // invalidated the tags in its own L1 before publishing).
    if ((dot === -1 ? sender : sender.slice(0, dot)) === origin) return;
    const kind = text.slice(first + 1, second);
    if (kind === ACKNOWLEDGE) {
      // `<origin>|a|<sender>|<receiver>` (without the receiver: a receiver of its own).
      const rest = text.slice(second + 1);
      const bar = rest.indexOf('|');
      const waiter = awaiting.get(bar === -1 ? rest : rest.slice(0, bar));
      const from = bar === -1 ? sender : rest.slice(bar + 1);
      // Behind this cache's own receiver: not among the receivers it waits for.
      if (waiter === undefined || from === receiver) return;
      waiter.heard.add(from);
      if (waiter.heard.size >= waiter.expected) waiter.done();
    } else if (kind === EVICT_KEY) {
      counters.busEvictions++;
      const key = decodeTag(text.slice(second + 1));
      // A change that waits for acknowledgements (invalidate, delete, setValue; not a fill's write)
      // also stops this process's fill or read of the key in flight from answering later callers.
      if (dot !== -1) supersedeHere((state) => supersedeFlights(state, key));
      const applied = evictLocal(key);
      if (dot !== -1) acknowledge(sender, applied);
    } else if (kind === INVALIDATE_TAGS) {
      const tags = text
        .slice(second + 1)
        .split(',')
        .filter((tag) => tag.length !== 0)
        .map(decodeTag);
      if (tags.length === 0) return;
      // One per message, as for a key: what the other replicas' changes cost this one.
      counters.busEvictions++;
      supersedeHere((state) => supersedeTagged(state, new Set(tags)));
      const applied = invalidateLocalTags(tags);
      if (dot !== -1) acknowledge(sender, applied);
    }
  };
  let acknowledged = false;
  // Whether this replica hears the bus now (between an acknowledgement and a loss).
  let listening = false;
  // Whether the bus told this replica it lost its subscription, and has not told it is back since.
  // Meanwhile another replica's change goes unheard: L1 answers only when the remote cannot (see
  // `afterLocal`), and the core's hit path does not read it (see `LOCAL_TIER_KEY`).
  let deaf = false;
  // When the bus was last lost or recovered (`Date.now()`, -Infinity before): a write whose entry
  // was created (a fill: started) at or before it may carry what the source held before a change
  // this replica did not hear, so L1 does not keep it (the remote still stores it: it refuses one
  // older than a delete or a newer entry, and reads one older than a tag invalidation as a miss).
  let busResetAt = Number.NEGATIVE_INFINITY;
  // Set when the core's state was denied `local` as its hit path's L1 while deaf (see
  // `LOCAL_TIER_KEY`): it gets it back when the bus recovers.
  let localTierWithheld = false;
  // What was in flight when the bus was lost or came back may predate a change missed meanwhile
  // (which keys it touched is unknown): reads and writes of the remote then are not kept in L1, and
  // this process's fills and shared reads answer no caller arriving from now on. Their writes still
  // go out: the remote refuses one older than a delete or a newer entry, and reads one older than a
  // tag invalidation as a miss.
  const forgetInFlight = (): void => {
    busResetAt = Date.now();
    for (const set of pending.values()) for (const token of set) token.evicted = true;
    supersedeHere((state) => {
      state.reads.clear();
      for (const flight of [...state.flights.values()]) flight.detach();
    });
  };
  const onLost = (): void => {
    if (closed) return;
    listening = false;
    deaf = true;
    forgetInFlight();
    const state = self === undefined ? undefined : existingState(self);
    if (state?.localTier === local) {
      state.localTier = undefined;
      localTierWithheld = true;
    }
  };
  const onSubscribed = (id?: string): void => {
    // An id that could not travel in a message field is no id.
    receiver = typeof id === 'string' && id.length !== 0 && !/[|\r\n]/.test(id) ? id : origin;
    const recovery = acknowledged;
    acknowledged = true;
    listening = true;
    deaf = false;
    // Copies taken before the subscription was acknowledged may have missed messages too; only a
    // reconnection counts as a recovery.
    clearLocal();
    if (!recovery) return;
    // Likewise what is in flight: a change missed meanwhile may postdate it.
    forgetInFlight();
    if (localTierWithheld && !closed && self !== undefined) {
      const state = existingState(self);
      if (state !== undefined) state.localTier = local;
    }
    localTierWithheld = false;
    counters.busRecoveries++;
    if (hasListeners()) emit({ type: 'bus-recovery', cache: name });
  };
  // This tiered cache's hold on `local` (see `localTiers`), taken once nothing can throw any more.
  const claim = { name };
  const unsubscribe = bus?.subscribe({
    message: onMessage,
    subscribed: onSubscribed,
    lost: onLost,
  });

  const readRemote = (key: string, copy: CacheEntry | undefined): MaybePromise<CacheEntry | undefined> => {
    const token = begin(key);
    const startedAt = Date.now();
    const found = (entry: CacheEntry | undefined): CacheEntry | undefined => {
      end(key, token);
      if (entry === undefined) return undefined;
      counters.l2Hits++;
      answeredBy.set(entry, ANSWERED_BY_L2);
      // Kept `localTtl`, past the entry's grace too: what a read finds there then is a miss, and
      // with the remote down fail-safe's fallback (see `failed`). An entry already past its grace
      // is not kept (L1 takes such a write for a removal).
      if (!token.evicted && !invalidatedDuring(token, entry) && Date.now() < entry.staleUntil)
        keepLocal(key, l1Copy(entry, startedAt), localTtl, true);
      return entry;
    };
    const failed = (error: unknown): CacheEntry | undefined => {
      end(key, token);
      if (copy === undefined) throw error;
      // The remote is down: an L1 copy beats a miss. Within its grace SWR serves it; past it, it is
      // a miss that fail-safe may fall back on (within `maxStale`).
      reportBackendError(name, 'get', key, error);
      answeredBy.set(copy, ANSWERED_BY_NEITHER);
      return copy;
    };
    let read: MaybePromise<CacheEntry | undefined>;
    try {
      read = remote.get(key);
    } catch (error) {
      return failed(error);
    }
    if (!isThenable(read)) return found(read);
    return Promise.resolve(read).then(found, failed);
  };

  const afterLocal = (
    key: string,
    copy: CacheEntry | undefined,
    pending?: true,
  ): MaybePromise<CacheEntry | undefined> => {
    // Deaf to the bus, L1 may hold what another replica has changed since: the remote answers, and
    // the copy only when the remote cannot.
    if (copy !== undefined && !deaf && stillBefore(copy.freshUntil)) {
      counters.l1Hits++;
      // The entry as the remote has it: its own freshness decides early refreshes.
      const entry = originals.get(copy) ?? copy;
      // An asynchronous read may be shared by callers (see `answeredBy`).
      if (pending) answeredBy.set(entry, ANSWERED_BY_L1);
      return entry;
    }
    if (copy === undefined) tracked?.delete(key);
    return readRemote(key, copy);
  };

  // The entries L1 copies were cut from, by copy (see `l1Copy`).
  const originals = new WeakMap<CacheEntry, CacheEntry>();
  // Which tier answered the latest read of each entry handed out that callers may share (an
  // asynchronous read; see `TIER_ANSWERS_KEY`): the core counts their l1Hits/l2Hits by it.
  const answeredBy: TierAnswers = new WeakMap();
  // L1 compares a tagged copy's `createdAt` with the times it learnt of tag invalidations. The
  // remote checked the entry's tags when the read ran, so the copy counts as created when the read
  // started: a copy read before L1 learnt of an invalidation is dropped then, and one read after it
  // is kept (with the entry's own `createdAt`, an entry refilled after the invalidation but before
  // the bus message arrived would be dropped on every read and fetched again). Never later than the
  // read either: a remote entry's `createdAt` comes back through an estimate of the server's clock,
  // which may put it after the read, and a copy stamped so would outlive an invalidation learnt then.
  //
  // An L1 copy is fresh for `localTtl` at most: its `freshUntil` is cut to that, so both L1 hit paths
  // (this cache's `get` and the core's, which reads `local` directly) ask the remote again once it
  // passes, to the millisecond (the local cache's own expiry of the copy may come later: the memory
  // cache reads the clock for expiry once a second). `get` hands out the entry with its own
  // `freshUntil` (`originals`), so early refreshes are timed by the entry, not by the copy.
  const l1Copy = (entry: CacheEntry, readAt?: number): CacheEntry => {
    const createdAt =
      readAt === undefined || entry.tags === undefined || readAt === entry.createdAt
        ? entry.createdAt
        : readAt;
    const localUntil = Date.now() + localTtl;
    if (createdAt === entry.createdAt && !(entry.freshUntil > localUntil)) return entry;
    const copy = changeEntry(entry, {
      createdAt,
      freshUntil: Math.min(entry.freshUntil, localUntil),
    });
    originals.set(copy, entry);
    return copy;
  };

  // Apart from `get`: a function that creates a closure allocates what it captures on every call,
  // and most reads of a tiered cache are synchronous L1 reads.
  const afterPendingLocal = (
    key: string,
    copy: PromiseLike<CacheEntry | undefined>,
  ): Promise<CacheEntry | undefined> =>
    Promise.resolve(copy).then(
      (entry) => afterLocal(key, entry, true),
      (error: unknown) => {
        reportBackendError(name, 'get', key, error);
        return readRemote(key, undefined);
      },
    );

  const cache: TieredCache = {
    name,
    local,
    remote,
    get(key) {
      // A miss answers with a promise: a bad key is refused the same way, never thrown.
      try {
        checkCacheKey(key);
      } catch (error) {
        return Promise.reject(error);
      }
      if (closed) return readRemote(key, undefined);
      let copy: MaybePromise<CacheEntry | undefined>;
      try {
        copy = local.get(key);
      } catch (error) {
        reportBackendError(name, 'get', key, error);
        return readRemote(key, undefined);
      }
      if (!isPendingRead(copy)) return afterLocal(key, copy);
      return afterPendingLocal(key, copy);
    },
    set(key, entry, setOptions) {
      try {
        checkCacheKey(key);
        checkCacheWrite(entry, setOptions);
      } catch (error) {
        return Promise.reject(error);
      }
      return writeThrough(key, entry, setOptions, () => remote.set(key, entry, setOptions));
    },
    async delete(key) {
      checkCacheKey(key);
      let failure: { error: unknown } | undefined;
      try {
        await remote.delete(key);
      } catch (error) {
        failure = { error };
      }
      evictLocal(key);
      // A failed remote delete changed nothing to tell: its own error stands.
      await publishEviction(key, failure === undefined);
      if (failure !== undefined) throw failure.error;
    },
    close(closeOptions?: WhenIdleOptions) {
      let timeout: number;
      try {
        timeout = idleTimeout(closeOptions);
      } catch (error) {
        return Promise.reject(error);
      }
      // `local` is freed once this cache's fills have stopped writing into it, or once `timeout`
      // passed: emptied of this cache's copies, and never read or written by it again (see
      // `closed`), so a tiered cache that takes it over (another remote, another tenant) is never
      // answered with this one's values, not even by a fill that lands after the timeout.
      const finish = (): void => {
        if (closed) return;
        clearLocal();
        closed = true;
        const state = (cache as { [STATE_KEY]?: { localTier?: Cache } })[STATE_KEY];
        if (state !== undefined) state.localTier = undefined;
        if (localTiers.get(local) === claim) localTiers.delete(local);
        unsubscribe?.();
        listening = false;
        for (const waiter of awaiting.values()) waiter.done();
      };
      // Idle: done now, as a caller that does not await expects.
      if (!hasWork(cache)) {
        finish();
        return Promise.resolve();
      }
      return whenIdle(cache, { timeout }).then(finish);
    },
  };

  // A write through to the remote (`set`, or a lock's commit, which writes and releases in one
  // step), then L1 and the bus as the remote's answer says.
  const writeThrough = async (
    key: string,
    entry: CacheEntry,
    setOptions: CacheSetOptions,
    write: () => unknown,
  ): Promise<boolean> => {
    const token = begin(key);
    let written: unknown;
    let failure: { error: unknown } | undefined;
    try {
      written = await write();
    } catch (error) {
      failure = { error };
    } finally {
      end(key, token);
    }
    // Reads of the key in flight (and other writes) may carry what the remote held before this
    // write landed: their result is not kept in L1 over this one (a read that started in the same
    // millisecond would otherwise tie with it and win).
    const others = pending.get(key);
    if (others !== undefined) for (const other of others) other.evicted = true;
    // Refused by the remote (a newer entry or delete is there), or changed elsewhere meanwhile:
    // L1 must not keep this copy. A failed remote write still lands in L1 (the remote is down).
    if (
      written === false ||
      token.evicted ||
      invalidatedDuring(token, entry) ||
      !(entry.createdAt > busResetAt)
    ) {
      evictLocal(key);
    } else {
      const carried = localCopy(entry);
      if (carried !== undefined) {
        const copy = l1Copy(carried);
        const ttl = setOptions.ttl === undefined ? localTtl : Math.min(setOptions.ttl, localTtl);
        // Stored by the remote, which has checked it against its own deletes: L1 follows even if it
        // deleted the key since the write's fill started (say, on a refused write or a bus
        // message). Only the never-older rule against L1's own copy applies then.
        keepLocal(
          key,
          copy,
          ttl,
          written === true ? true : setOptions.direct,
          written === true && copy.tags !== undefined,
        );
      }
    }
    // A direct write (`setValue`) is the caller's own change: it waits for the other replicas as an
    // invalidation does (and fails when they could not be told). A fill's write is not waited for
    // (its callers have their value already). A write that failed or was refused changed nothing
    // to tell: its own error (or answer) stands.
    const changed = failure === undefined && written !== false;
    await publishEviction(key, setOptions.direct === true && changed);
    if (failure !== undefined) throw failure.error;
    return written !== false;
  };

  // The value L1 keeps is the one the remote would give back, so L1 and L2 hits agree (a `Date`
  // read back as its ISO string on every replica). A value the remote cannot carry stays out of L1.
  const localCopy = (entry: CacheEntry): CacheEntry | undefined => {
    if (remote.roundTrip === undefined) return entry;
    try {
      return changeEntry(entry, { value: remote.roundTrip(entry.value) });
    } catch {
      return undefined;
    }
  };

  if (typeof remote.invalidateTags === 'function') {
    const invalidateRemote = remote.invalidateTags.bind(remote);
    const invalidateTags = async (tags: readonly string[]): Promise<void> => {
      checkTagList(tags);
      // The remote first: once it has answered, a miss of any replica refills from the source.
      await invalidateRemote(tags);
      invalidateLocalTags(tags);
      await send(INVALIDATE_TAGS, tags.map(encodeTag).join(','), undefined, true);
    };
    Object.assign(cache, { invalidateTags });
  }
  // The remote's lock, with its commit (a write and a release in one step) going through L1 and the
  // bus as `set` does.
  const tiedLock = (key: string, lock: FillLock | undefined): FillLock | undefined => {
    if (lock === undefined || lock === null || lock.commit === undefined) return lock ?? undefined;
    const commit = lock.commit.bind(lock);
    const tied: FillLock = {
      release: (outcome) => lock.release(outcome),
      // Checked here, not only by the remote's commit: a commit the remote fails still lands in L1.
      commit: (entry, setOptions) => {
        try {
          checkCacheWrite(entry, setOptions);
        } catch (error) {
          return Promise.reject(error);
        }
        return writeThrough(key, entry, setOptions, () => commit(entry, setOptions));
      },
    };
    if (lock.extend !== undefined) {
      const extend = lock.extend.bind(lock);
      Object.assign(tied, { extend });
    }
    return tied;
  };
  // Withdrawn between the look at the member and the call: a fault, never "another holder has it".
  const lockWithdrawn = (): Error => new Error('the remote cache no longer takes fill locks');
  /** One of the remote's lock calls, its arguments checked first, its lock tied to this cache. */
  const locking = <T>(
    key: string,
    ttl: number,
    withdrawn: boolean,
    call: () => MaybePromise<T>,
    tie: (found: T) => T,
  ): MaybePromise<T> => {
    // The remote's answer is a promise (or may be): so is the refusal.
    try {
      checkCacheKey(key);
      checkLockTtl(ttl);
    } catch (error) {
      return Promise.reject(error);
    }
    if (withdrawn) return Promise.reject(lockWithdrawn());
    const answer = call();
    return isThenable<T>(answer) ? Promise.resolve(answer).then(tie) : tie(answer);
  };
  // The lock members follow the remote's own at every look, not only at creation: a remote that
  // withdraws its lock (a Redis user refused scripts) answers `undefined` from then on, and so does
  // this cache, instead of calling a lock that can no longer be taken.
  // The live members are accessors every tiered cache shares (see TieredLive), reading this one's.
  const live: TieredLive = {
    remote,
    localTier: () => {
      if (closed) return undefined;
      if (!deaf) return local;
      localTierWithheld = true;
      return undefined;
    },
  };
  Object.defineProperty(cache, LIVE, { value: live });
  if (remote.tryAcquireFillLock !== undefined) {
    const tryAcquireFillLock = (key: string, ttl: number): MaybePromise<FillLock | undefined> =>
      locking(
        key,
        ttl,
        remote.tryAcquireFillLock === undefined,
        () => remote.tryAcquireFillLock?.(key, ttl),
        (held) => tiedLock(key, held),
      );
    live.tryAcquireFillLock = tryAcquireFillLock;
    Object.defineProperty(cache, 'tryAcquireFillLock', { get: tryAcquireFillLockOf, enumerable: true });
    if (remote.tryAcquireFillLockAndRead !== undefined) {
      const tryAcquireFillLockAndRead = (key: string, ttl: number): MaybePromise<FillLockAttempt> =>
        locking(
          key,
          ttl,
          remote.tryAcquireFillLockAndRead === undefined,
          () =>
            (remote.tryAcquireFillLockAndRead as NonNullable<Cache['tryAcquireFillLockAndRead']>)(key, ttl),
          (attempt) => ({ ...attempt, lock: tiedLock(key, attempt.lock) }),
        );
      live.tryAcquireFillLockAndRead = tryAcquireFillLockAndRead;
      Object.defineProperty(cache, 'tryAcquireFillLockAndRead', {
        get: tryAcquireFillLockAndReadOf,
        enumerable: true,
      });
    }
  }
  if (remote.onFillDone !== undefined) {
    const listen = remote.onFillDone.bind(remote);
    const onFillDone: NonNullable<Cache['onFillDone']> = (key, listener, ready) => {
      checkFillDoneArguments(key, listener, ready);
      return listen(key, listener, ready);
    };
    Object.assign(cache, { onFillDone });
    if (remote.hearsFillDone !== undefined) {
      const hears = remote.hearsFillDone.bind(remote);
      const hearsFillDone = (key: string): boolean => {
        checkCacheKey(key);
        return hears(key);
      };
      Object.assign(cache, { hearsFillDone });
    }
  }
  if (remote.roundTrip !== undefined) {
    const roundTrip = remote.roundTrip.bind(remote);
    Object.assign(cache, { roundTrip });
  }
  // The core's hit path reads fresh L1 copies straight from `local` (see `CacheState.localTier`).
  // Not while deaf to the bus: the state made then gets it when the bus recovers.
  Object.defineProperty(cache, LOCAL_TIER_KEY, { get: localTierOf, enumerable: false });
  Object.defineProperty(cache, TIER_ANSWERS_KEY, { value: answeredBy, enumerable: false });
  localTiers.set(local, claim);
  self = cache;
  return cache;
}

// A tiered cache's live members (its lock members, which follow the remote's, and the local tier the
// core's hit path reads) are accessors every tiered cache shares, reading the cache's own state from
// a slot of its own. An accessor made per cache (a closure) would put every tiered cache after the
// first in V8's dictionary mode, where each read of its methods is a hash lookup.
const LIVE = Symbol('@stampede/core/tiered-live');

/** What the shared accessors of a tiered cache read. */
interface TieredLive {
  readonly remote: Cache;
  /** The local tier while the core may read it directly (see `CacheState.localTier`). */
  readonly localTier: () => Cache | undefined;
  tryAcquireFillLock?: (key: string, ttl: number) => MaybePromise<FillLock | undefined>;
  tryAcquireFillLockAndRead?: (key: string, ttl: number) => MaybePromise<FillLockAttempt>;
}

type WithLive = { readonly [LIVE]?: TieredLive };

function tryAcquireFillLockOf(this: WithLive): TieredLive['tryAcquireFillLock'] {
  const live = this[LIVE];
  return live?.remote.tryAcquireFillLock === undefined ? undefined : live.tryAcquireFillLock;
}

function tryAcquireFillLockAndReadOf(this: WithLive): TieredLive['tryAcquireFillLockAndRead'] {
  const live = this[LIVE];
  return live?.remote.tryAcquireFillLockAndRead === undefined ? undefined : live.tryAcquireFillLockAndRead;
}

function localTierOf(this: WithLive): Cache | undefined {
  return this[LIVE]?.localTier();
}
