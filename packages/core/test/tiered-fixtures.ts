// Caches and a bus for the tiered cache's tests. The core cannot depend on @stampede/memory (it is
// memory's peer), so `localCache` is a small synchronous cache with the same rules: physical expiry,
// never-older, deletion records that refuse older fills, `clear`, and tags checked on read (an entry
// created at or before one of its tags' invalidation is a miss).
import type { Cache, CacheBus, CacheBusHandlers, CacheEntry, CacheSetOptions } from '../src/index.js';

/** What happened, in order, across the caches and the bus of one test. */
export type Log = string[];

export interface LocalCache extends Cache {
  get(key: string): CacheEntry | undefined;
  set(key: string, entry: CacheEntry, options: CacheSetOptions): boolean;
  delete(key: string): void;
  clear(): void;
  invalidateTags(tags: readonly string[], at?: number): void;
  /** When the stored copy of `key` expires physically (Infinity for none), or undefined. */
  expiresAt(key: string): number | undefined;
  readonly size: number;
}

/**
 * A synchronous in-process cache following the memory adapter's rules. `lateBy` ms: its physical
 * expiry comes that late (the memory adapter reads the clock for expiry once a second).
 */
export function localCache(log: Log = [], label = 'local', lateBy = 0): LocalCache {
  const entries = new Map<string, { entry: CacheEntry; expiresAt: number }>();
  const deletions = new Map<string, number>();
  const tagTimes = new Map<string, number>();
  let floor = Number.NEGATIVE_INFINITY;
  const taggedOut = (entry: CacheEntry): boolean =>
    (entry.tags ?? []).some((tag) => entry.createdAt <= (tagTimes.get(tag) ?? Number.NEGATIVE_INFINITY));
  const live = (key: string) => {
    const found = entries.get(key);
    if (found !== undefined && (Date.now() >= found.expiresAt || taggedOut(found.entry))) {
      entries.delete(key);
      return undefined;
    }
    return found;
  };
  return {
    name: label,
    get size() {
      return entries.size;
    },
    get(key) {
      return live(key)?.entry;
    },
    set(key, entry, { ttl, direct }) {
      log.push(`${label}.set ${key}`);
      if (direct !== true && (entry.createdAt < floor || entry.createdAt < (deletions.get(key) ?? floor)))
        return false;
      const stored = live(key)?.entry;
      if (stored !== undefined && stored.createdAt > entry.createdAt) return false;
      if ((ttl !== undefined && !(ttl > 0)) || !(entry.staleUntil > Date.now()) || taggedOut(entry))
        entries.delete(key);
      else
        entries.set(key, {
          entry,
          expiresAt: ttl === undefined ? Number.POSITIVE_INFINITY : Date.now() + ttl + lateBy,
        });
      return true;
    },
    delete(key) {
      log.push(`${label}.delete ${key}`);
      entries.delete(key);
      deletions.set(key, Date.now());
    },
    invalidateTags(tags, at = Date.now()) {
      log.push(`${label}.invalidateTags ${tags.join(',')}`);
      for (const tag of tags) tagTimes.set(tag, Math.max(at, tagTimes.get(tag) ?? at));
    },
    clear() {
      log.push(`${label}.clear`);
      entries.clear();
      deletions.clear();
      floor = Date.now();
    },
    expiresAt(key) {
      return live(key)?.expiresAt;
    },
  };
}

/** The shared "server" of the remote caches: entries, tombstones and a pub/sub hub. */
export class RemoteStore {
  readonly entries = new Map<string, { entry: CacheEntry; expiresAt: number }>();
  readonly deletedAt = new Map<string, number>();
  /** When each tag was last invalidated (the remotes with `tags: true` check entries against it). */
  readonly tagTimes = new Map<string, number>();
  readonly subscribers = new Set<CacheBusHandlers>();
  /** The receiving end of each subscriber, as `publish` counts them (one per connection). */
  readonly receivers = new Map<CacheBusHandlers, string>();
  /** Remote caches whose subscribers' connection is slow: their messages wait in `late` until `catchUp`. */
  readonly slow = new Set<Cache>();
  /** The remote cache each subscriber subscribed through. */
  readonly owners = new Map<CacheBusHandlers, Cache>();
  readonly late: [CacheBusHandlers, string][] = [];
  /** While true, published messages wait in `held` (a slow network). */
  hold = false;
  readonly held: string[] = [];
  /** While true, every remote call (and publish) throws: the server is down. */
  down = false;
  /** While true, `publish` answers how many subscribers received the message (as Redis does). */
  countsReceivers = false;
  /** While true, `publish` throws (and delivers nothing); every other call works. */
  publishFails = false;
  /** Subscribers whose connection `drop` cut: they hear nothing and are not counted until `restore`. */
  readonly dropped = new Set<CacheBusHandlers>();

  read(key: string): CacheEntry | undefined {
    const found = this.entries.get(key);
    if (found === undefined) return undefined;
    const { createdAt, tags = [] } = found.entry;
    if (tags.some((tag) => createdAt <= (this.tagTimes.get(tag) ?? Number.NEGATIVE_INFINITY)))
      return undefined;
    if (Date.now() >= found.expiresAt) {
      this.entries.delete(key);
      return undefined;
    }
    return found.entry;
  }

  write(key: string, entry: CacheEntry, ttl: number | undefined, direct?: boolean): boolean {
    const existing = this.read(key);
    if (existing !== undefined && existing.createdAt > entry.createdAt) return false;
    if (direct !== true && entry.createdAt < (this.deletedAt.get(key) ?? Number.NEGATIVE_INFINITY))
      return false;
    this.entries.set(key, {
      entry,
      expiresAt: ttl === undefined ? Number.POSITIVE_INFINITY : Date.now() + ttl,
    });
    return true;
  }

  deliver(message: string): void {
    if (this.hold) {
      this.held.push(message);
      return;
    }
    for (const handlers of [...this.subscribers]) {
      const owner = this.owners.get(handlers);
      if (owner !== undefined && this.slow.has(owner)) this.late.push([handlers, message]);
      else handlers.message(message);
    }
  }

  /** How many receiving ends (connections) hear the bus now. */
  receiverCount(): number {
    // A subscriber added to the hub by hand is a receiver of its own.
    const ends = new Set<unknown>();
    for (const handlers of this.subscribers) ends.add(this.receivers.get(handlers) ?? handlers);
    return ends.size;
  }

  /** Delivers what the slow subscribers' connections held back. */
  catchUp(): void {
    for (const [handlers, message] of this.late.splice(0)) handlers.message(message);
  }

  /** Delivers the held messages and stops holding. */
  release(): void {
    this.hold = false;
    for (const message of this.held.splice(0)) this.deliver(message);
  }

  /** The subscribers' connections drop... */
  disconnect(): void {
    for (const handlers of this.subscribers) handlers.lost?.();
  }

  /** ...and come back: every subscription is acknowledged again. */
  reconnect(): void {
    for (const handlers of this.subscribers) handlers.subscribed?.(this.connectionOf.get(handlers));
  }

  /**
   * The subscriber connection of one remote cache drops (as `CLIENT KILL TYPE pubsub` of one
   * replica): its subscribers are told `lost`, miss every message and are not counted by `publish`
   * until `restore`. Its other calls still work.
   */
  drop(remote: Cache): void {
    for (const handlers of [...this.subscribers]) {
      if (this.owners.get(handlers) !== remote) continue;
      this.subscribers.delete(handlers);
      this.dropped.add(handlers);
      handlers.lost?.();
    }
  }

  /** ...and comes back: its subscriptions are acknowledged again. */
  restore(remote: Cache): void {
    for (const handlers of [...this.dropped]) {
      if (this.owners.get(handlers) !== remote) continue;
      this.dropped.delete(handlers);
      this.subscribers.add(handlers);
      handlers.subscribed?.(this.connectionOf.get(handlers));
    }
  }
  /** The connection id a subscriber was told, for a remote that shares one (see `connection`). */
  readonly connectionOf = new Map<CacheBusHandlers, string | undefined>();
}

export interface RemoteCache extends Cache {
  readonly calls: { get: number; set: number; delete: number; publish: number; tags: number };
  readonly store: RemoteStore;
  /** Read results wait for `releaseReads()` while true. */
  holdReads: boolean;
  releaseReads(): void;
  /** Writes wait for `releaseWrites()` (and land then) while true: a write on its way. */
  holdWrites: boolean;
  releaseWrites(): void;
}

export interface RemoteCacheOptions {
  /** Offer a bus. @default true */
  bus?: boolean;
  /** Offer `roundTrip` through JSON. @default false */
  roundTrip?: boolean;
  /** Offer `invalidateTags` (on the store's clock: `Date.now()`). @default false */
  tags?: boolean;
  log?: Log;
  /**
   * Its subscribers share one connection, which `publish` counts once, and are told its id (as a
   * Redis cache's are); without it, each subscriber is a receiver of its own.
   */
  connection?: string;
}

let subscriptions = 0;

/** An asynchronous remote cache on `store`, with a bus on the store's hub. */
export function remoteCache(store: RemoteStore, options: RemoteCacheOptions = {}): RemoteCache {
  const log = options.log ?? [];
  const calls = { get: 0, set: 0, delete: 0, publish: 0, tags: 0 };
  const waiting: (() => void)[] = [];
  const writing: (() => void)[] = [];
  const check = (): void => {
    if (store.down) throw new Error('remote down');
  };
  const cache: RemoteCache = {
    name: 'remote',
    calls,
    store,
    holdReads: false,
    releaseReads() {
      this.holdReads = false;
      for (const go of waiting.splice(0)) go();
    },
    holdWrites: false,
    releaseWrites() {
      this.holdWrites = false;
      for (const go of writing.splice(0)) go();
    },
    async get(key) {
      calls.get++;
      check();
      if (cache.holdReads) {
        const entry = store.read(key);
        await new Promise<void>((resolve) => waiting.push(resolve));
        return entry;
      }
      return store.read(key);
    },
    async set(key, entry, { ttl, direct }) {
      calls.set++;
      log.push(`remote.set ${key}`);
      check();
      if (cache.holdWrites) await new Promise<void>((resolve) => writing.push(resolve));
      return store.write(key, entry, ttl, direct);
    },
    async delete(key) {
      calls.delete++;
      log.push(`remote.delete ${key}`);
      check();
      store.entries.delete(key);
      store.deletedAt.set(key, Date.now());
    },
  };
  if (options.bus !== false) {
    const bus: CacheBus = {
      async publish(message) {
        calls.publish++;
        log.push(`publish ${message.slice(message.indexOf('|') + 1)}`);
        check();
        if (store.publishFails) throw new Error('publish timed out');
        const receivers = store.receiverCount();
        store.deliver(message);
        return store.countsReceivers ? receivers : undefined;
      },
      subscribe(handlers) {
        store.subscribers.add(handlers);
        store.receivers.set(handlers, options.connection ?? `own-${++subscriptions}`);
        store.connectionOf.set(handlers, options.connection);
        store.owners.set(handlers, cache);
        handlers.subscribed?.(options.connection);
        return () => {
          store.subscribers.delete(handlers);
          store.receivers.delete(handlers);
          store.connectionOf.delete(handlers);
          store.owners.delete(handlers);
        };
      },
    };
    Object.assign(cache, { bus });
  }
  if (options.tags === true) {
    Object.assign(cache, {
      async invalidateTags(tags: readonly string[]) {
        calls.tags++;
        log.push(`remote.invalidateTags ${tags.join(',')}`);
        check();
        for (const tag of tags) store.tagTimes.set(tag, Date.now());
      },
    });
  }
  if (options.roundTrip === true) {
    Object.assign(cache, { roundTrip: (value: unknown) => JSON.parse(JSON.stringify(value)) });
  }
  return cache;
}
