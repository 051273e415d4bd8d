/** A value or a promise of it: adapters answer synchronously when they can. */
export type MaybePromise<T> = T | PromiseLike<T>;

/**
 * What a {@link Cache} stores for one key: the value and the times that decide its freshness.
 * Freshness lives here, not in the backend's expiry, so correctness never depends on the backend
 * evicting on time. All times are milliseconds since the epoch.
 */
export interface CacheEntry<T = unknown> {
  /** The cached value (anything but `undefined`; `null` is a value). */
  readonly value: T;
  /**
   * When the fill function that produced this value was called (after any lock wait: the age of the
   * data it read): a write never replaces a newer entry.
   */
  readonly createdAt: number;
  /** Fresh while `now < freshUntil`; `Infinity` means fresh forever. */
  readonly freshUntil: number;
  /** May be served stale (with stale-while-revalidate) while `now < staleUntil`; `>= freshUntil`. */
  readonly staleUntil: number;
  /**
   * The tags the value was written with (`tags` of `getOrComputeWith`/`setValue`), or `undefined`
   * for none. A cache with {@link Cache.invalidateTags} reads an entry as a miss once one of its tags
   * was invalidated after `createdAt`.
   */
  readonly tags?: readonly string[] | undefined;
  /**
   * How long the fill that produced this value ran, in milliseconds: what `earlyRefresh` scales its
   * head start by, and when a replica waiting for another's fill of the key first looks for its
   * value. `undefined` when unknown (a `setValue`, or an entry an older release wrote). Adapters
   * store it with the entry when they can; one that drops it only loses those two optimisations.
   */
  readonly delta?: number | undefined;
}

/** Options for {@link Cache.set}. */
export interface CacheSetOptions {
  /**
   * Physical time to live in milliseconds (the backend may drop the entry after it): `ttl + grace`
   * (with fail-safe `ttl + max(grace, maxStale)`).
   * `undefined` keeps the entry until it is deleted or evicted. `0` (or less) means the entry is
   * already expired: see {@link Cache.set}.
   */
  readonly ttl: number | undefined;
  /**
   * True for a direct write (`setValue`): it is made after every delete its caller knows of, so it
   * replaces a delete's marker (tombstone) whatever the two times say, where a fill's write is
   * refused by a delete newer than the fill's start. Remote caches need this: their times are on
   * the server's clock, estimated to within about a round trip, so a write right after a delete
   * could otherwise be taken for an older fill. For the same reason a remote cache lets it replace
   * a stored entry whatever its time (two replicas' `setValue`s land in the order the server runs
   * them), and stamps a fill's times with an estimate never ahead of the server's clock, so a fill
   * never passes for newer than it is. A cache on one clock (the memory cache) keeps the
   * never-older rule for it.
   * @default false
   */
  readonly direct?: boolean | undefined;
  /**
   * The entry this write renews (fail-safe's re-arm): one this cache returned, written back with the
   * same value and `createdAt` and new `freshUntil` / `staleUntil`. A cache that converts times
   * (a remote cache stores them on its server's clock, through an estimate that may have moved
   * since the read) should store the renewed entry's `createdAt` exactly as it stored this one's,
   * so the never-older rule sees the same fill. A cache that stores times as given can ignore it.
   * @default undefined
   */
  readonly renews?: CacheEntry | undefined;
  /**
   * True for a fill's write whose fill started after every invalidation of the entry's tags this
   * process had made (`invalidateTag(s)` through any cache object): it read nothing older than them.
   * A cache that can tell the invalidations its own process made from those heard from elsewhere
   * may then date the entry just past their records, even in their millisecond (the memory cache
   * does, so that `invalidateTag` then a refill costs one fill). Never true for a direct write or a
   * re-arm. A cache shared by processes must not treat a record another process made this way.
   * @default undefined
   */
  readonly afterInvalidations?: boolean | undefined;
}

/** How a fill under a distributed lock ended, told to the lock on release. */
export type FillOutcome = 'filled' | 'failed';

/** A held distributed fill lock. */
export interface FillLock {
  /**
   * Releases the lock if this holder still owns it (compare-and-delete on a random token) and,
   * where the cache supports push wake-up, tells the waiting replicas how the fill ended.
   */
  release(outcome: FillOutcome): MaybePromise<void>;
  /**
   * Pushes the lock's expiry to `ttl` ms from now while a long fill still runs; resolves `false` when
   * the lock is no longer this holder's. Optional: without it a fill longer than `lockTtl` may admit a
   * second filler.
   */
  extend?: ((ttl: number) => MaybePromise<boolean>) | undefined;
  /**
   * Writes `entry` exactly as {@link Cache.set} would (same never-older guard, same answer), then
   * releases the lock as `'filled'` and announces it, in one step: what a holder does after a fill
   * that produced a value, at the cost of one round trip instead of two.
   *
   * Contract: it releases (compare-and-delete on this holder's token) and announces even when the
   * write is refused (a newer entry or delete is there) or the lock has lapsed (the write is still
   * made through the guard; another holder's lock is never deleted); it may stay silent when another
   * holder has taken the lapsed lock and nothing was stored (that holder's waiters wait for it). Waiters must find the entry (or
   * the newer one) once the announcement is out, so the write comes first. If it rejects, the core
   * reports a `set` fault and calls {@link FillLock.release} with `'filled'`: a commit that fails
   * must leave `release` usable (a release after a commit that did land is a harmless no-op).
   *
   * Optional: without it the core calls `set`, then `release('filled')`. A cache whose lock lives
   * apart from its values (another server) cannot combine them and should leave it out.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: answers like `Cache.set`, which may answer nothing
  commit?: ((entry: CacheEntry, options: CacheSetOptions) => MaybePromise<void | boolean>) | undefined;
}

/** What {@link Cache.tryAcquireFillLockAndRead} found. */
export interface FillLockAttempt {
  /** The lock, or `undefined` when another holder has it. */
  readonly lock: FillLock | undefined;
  /**
   * The entry for the key, as {@link Cache.get} would have answered at the same moment as the lock
   * attempt (the key's tags checked, a delete's marker read as `undefined`). Taken whether or not the
   * lock was granted: a holder uses it instead of reading the key again, a loser may find the value
   * another replica just wrote.
   */
  readonly entry: CacheEntry | undefined;
  /**
   * Who holds the lock when it was not granted, as an opaque identity the cache's announcements
   * name too (see {@link FillAnnouncement.holder}); `undefined` when unknown. A waiter accepts a
   * value carried by an announcement only from the holder it lost to: that holder still held the
   * lock at the attempt, so its commit (and the value it carries) came after the waiter's read.
   */
  readonly holder?: string | undefined;
}

/**
 * What an announcement of a fill's end carried beyond its outcome (see {@link Cache.onFillDone}):
 * the value, so a woken waiter need not read the key.
 */
export interface FillAnnouncement {
  /** The identity of the holder that announced (as {@link FillLockAttempt.holder} gives it). */
  readonly holder: string;
  /**
   * The entry a read of the key gave right after the holder's write (or the newer one that refused
   * it), its tags checked; `undefined` when the announcement carried none (too big, or nothing
   * readable): the waiter then reads the key.
   */
  readonly entry: CacheEntry | undefined;
}

/**
 * The contract every stampede adapter implements. Required: read, write with a physical TTL, delete.
 * Optional capabilities: a distributed fill lock and push notification of fills done elsewhere.
 *
 * Adapters may answer synchronously (the memory adapter does, so hits never touch a promise chain)
 * or with a promise. They should bound remote calls in time and throw (or reject) on faults: the
 * core turns a failed read into a miss and a failed write into an event, never into a failed call.
 */
export interface Cache {
  /** A name for stats, events and metric labels (never a key). @default 'default' */
  readonly name?: string | undefined;
  /** The entry for `key`, or `undefined`. An entry that cannot be decoded is `undefined`. */
  get(key: string): MaybePromise<CacheEntry | undefined>;
  /**
   * Stores `entry` unless a newer one (larger `createdAt`) is already there, or the key was deleted
   * after `entry.createdAt` (see {@link Cache.delete}). Once it resolves, the next read sees `entry`
   * or that newer one.
   *
   * An entry that is already expired (a physical `ttl` of 0 or less, or `staleUntil` not after
   * now) is not stored, but still takes effect: the key reads as a miss afterwards. The adapter
   * removes what is stored unless a newer entry (larger `createdAt`) is there; it must not simply
   * ignore the write and leave an older value readable.
   *
   * May answer `false` when it refused the write (a newer entry or a newer delete was there), and
   * `true` or nothing when it stored it (or removed what was stored, for an expired entry). A tiered
   * cache reads the answer: a write its remote refused must not stay in its local copy.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: `void` keeps adapters that answer nothing valid
  set(key: string, entry: CacheEntry, options: CacheSetOptions): MaybePromise<void | boolean>;
  /**
   * Removes `key`; an in-flight fill that started earlier must not bring it back: a later `set`
   * whose `entry.createdAt` is before the deletion is refused. `Date.now()` cannot order a fill and
   * a delete within one millisecond; an adapter documents which way it breaks that tie.
   */
  delete(key: string): MaybePromise<void>;
  /**
   * Tries to take the fill lock for `key` for `ttl` ms. Resolves the lock, or `undefined` when
   * another holder has it. Optional: without it `distributedFillLock` falls back to in-process
   * protection with a one-time warning. A cache that had it and can no longer take locks (a Redis
   * user refused scripts) makes the member answer `undefined` (a getter) and warns itself: the core
   * then protects in-process without a warning of its own.
   */
  tryAcquireFillLock?: ((key: string, ttl: number) => MaybePromise<FillLock | undefined>) | undefined;
  /**
   * {@link Cache.tryAcquireFillLock} and {@link Cache.get} of `key` in one step (one round trip: on
   * Redis, one script that reads the entry and tries `SET NX PX`). The core uses it for a flight's
   * lock attempts: a holder then needs no second read to learn whether another replica filled the
   * key between its miss and its lock, and a loser learns who holds the lock. Its contract is the
   * two calls': the same lock, the same entry a `get` would give (a read fault rejects, as `get`
   * does). Optional, and only used alongside `tryAcquireFillLock`: without it the core tries the
   * lock, then (when granted) reads the key.
   */
  tryAcquireFillLockAndRead?: ((key: string, ttl: number) => MaybePromise<FillLockAttempt>) | undefined;
  /**
   * Calls `listener` when a fill of `key` under the lock ends on any replica (push wake-up). Returns
   * the function that stops listening. Optional: waiters poll without it.
   *
   * `ready`, when given, is to be called once the listener can hear announcements (the subscription
   * is acknowledged; at once if it already was). A fill that ended between the waiter's lost lock
   * attempt and that moment was announced to no one: on `ready` the waiter reads the key once at
   * once instead of sleeping `lockPollInterval`. Optional: an adapter that never calls it keeps the
   * plain poll schedule.
   *
   * `announced`, when given, is what the announcement carried besides the outcome (see
   * {@link FillAnnouncement}): a cache that knows the stored value at the fill's end may hand it over
   * so the waiter does not read the key. Adapters that announce only the outcome leave it out.
   */
  onFillDone?:
    | ((
        key: string,
        listener: (outcome: FillOutcome, announced?: FillAnnouncement) => void,
        ready?: () => void,
      ) => () => void)
    | undefined;
  /**
   * True when a listener given to {@link Cache.onFillDone} for `key` right now would hear every
   * announcement made from now on: the key's subscription is already acknowledged (a cache may keep
   * a key's subscription for a while after its last listener left). The core then starts listening
   * before its lock attempt, and a lost attempt needs no confirming read (see `ready`). Optional:
   * without it (or when it answers `false`) the core listens only after losing the lock and reads
   * once on `ready`.
   */
  hearsFillDone?: ((key: string) => boolean) | undefined;
  /**
   * `value` as a later {@link Cache.get} of it would return it. A cache that stores text implements
   * it as its serializer's round trip (under JSON a `Date` comes back as its ISO string, `NaN` as
   * `null`, a `Map` as `{}`); the core hands a fill's callers this instead of the fill's own value,
   * so the caller that filled and the callers that hit later get the same thing. Throws for a value
   * the serializer cannot carry (a BigInt, a cycle): the callers then get the fill's value as it is
   * (and the write reports the fault). Optional: a cache that keeps values by reference (memory)
   * omits it, and callers get the fill's value itself.
   */
  roundTrip?: ((value: unknown) => unknown) | undefined;
  /**
   * Records that every entry carrying one of `tags` and created before now is gone: from the moment
   * it resolves, `get` answers `undefined` for such an entry (on every instance sharing the
   * backend), whatever its freshness. An entry created in the very millisecond of the invalidation
   * counts as before it (a same-millisecond fill may have read the old data; the cost is one more
   * fill). It must cost the same however many entries carry the tag: record the tag's invalidation
   * time (a remote cache on its server's clock) and compare it with an entry's `createdAt` on read.
   * Optional: without it `invalidateTag` rejects with a TypeError.
   */
  invalidateTags?: ((tags: readonly string[]) => MaybePromise<void>) | undefined;
  /**
   * An invalidation bus shared by every instance on the same backend and namespace (Redis pub/sub,
   * for example): what a tiered cache uses to evict a key from every replica's local copy. Optional:
   * without it a tiered cache keeps local copies only for its `localTtl`.
   */
  readonly bus?: CacheBus | undefined;
}

/**
 * Receives what arrives on a {@link CacheBus}. Called outside any request; a handler that throws is
 * ignored by the bus.
 */
export interface CacheBusHandlers {
  /** A message published by any instance on the bus, this one included. */
  message(text: string): void;
  /**
   * The subscription was acknowledged: called the first time, and again after every reconnection
   * (messages published while the connection was down were missed: a tiered cache clears its local
   * copies then).
   *
   * `receiver` names the receiving end as `publish` counts receivers, for a bus whose subscribers
   * share one (a Redis cache's subscribers share its one subscriber connection, which `PUBLISH`
   * counts once): give every subscriber of that end the same id (no `|`, CR or LF), so that a
   * tiered cache counts the acknowledgements from behind it once. Without it, each subscriber is
   * taken for a receiver of its own (right for a bus that opens a stream per subscriber).
   */
  subscribed?: ((receiver?: string) => void) | undefined;
  /** The subscription's connection dropped; `subscribed` follows once it is back. */
  lost?: (() => void) | undefined;
}

/**
 * A broadcast channel between the instances of one remote cache (every replica of a service). A
 * message reaches every subscriber, the publisher's own included; delivery is at most once (a
 * subscriber that is disconnected misses it, and learns it through `lost` and `subscribed`).
 */
export interface CacheBus {
  /**
   * Sends `message` to every subscriber. Resolves once the backend took it, with the number of
   * subscribers that received it when the backend tells (Redis's `PUBLISH` answers it): a tiered
   * cache then waits for their acknowledgements of an invalidation (see `createTieredCache`).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a bus written for the first release returns Promise<void>, which `undefined` would refuse
  publish(message: string): MaybePromise<void | number>;
  /**
   * Starts listening (opening the connection it needs on first use). Returns the function that
   * stops this subscriber.
   */
  subscribe(handlers: CacheBusHandlers): () => void;
}
