import type {
  Cache,
  CacheEntry,
  CacheSetOptions,
  FillAnnouncement,
  FillLock,
  FillOutcome,
} from '../src/index.js';

/** What a test cache saw. */
export interface Calls {
  get: number;
  set: number;
  delete: number;
  lock: number;
  release: FillOutcome[];
  /** Lock attempts made with `tryAcquireFillLockAndRead` (counted with `combined` only). */
  lockAndRead?: number;
  /** Commits (`FillLock.commit`; counted with `combined` only). */
  commit?: number;
}

/** A listener of {@link Backend}'s announcements. */
export type BackendListener = (outcome: FillOutcome, announced?: FillAnnouncement) => void;

/** A shared "server" that several test caches (replicas) can point at. */
export class Backend {
  readonly entries = new Map<string, { entry: CacheEntry; expiresAt: number }>();
  readonly locks = new Map<string, { token: number; expiresAt: number }>();
  readonly listeners = new Map<string, Set<BackendListener>>();
  /** When each key was last deleted: a fill that started earlier must not bring it back. */
  readonly deletedAt = new Map<string, number>();
  /** When each tag was last invalidated: an entry carrying it created earlier reads as a miss. */
  readonly tagInvalidatedAt = new Map<string, number>();
  private nextToken = 1;

  read(key: string): CacheEntry | undefined {
    const found = this.entries.get(key);
    if (found === undefined) return undefined;
    if (Date.now() >= found.expiresAt) {
      this.entries.delete(key);
      return undefined;
    }
    for (const tag of found.entry.tags ?? []) {
      if (found.entry.createdAt <= (this.tagInvalidatedAt.get(tag) ?? Number.NEGATIVE_INFINITY))
        return undefined;
    }
    return found.entry;
  }

  invalidateTags(tags: readonly string[]): void {
    const now = Date.now();
    for (const tag of tags)
      this.tagInvalidatedAt.set(tag, Math.max(now, this.tagInvalidatedAt.get(tag) ?? now));
  }

  write(key: string, entry: CacheEntry, ttl: number | undefined): void {
    const existing = this.read(key);
    if (existing !== undefined && existing.createdAt > entry.createdAt) return;
    if (entry.createdAt < (this.deletedAt.get(key) ?? Number.NEGATIVE_INFINITY)) return;
    this.entries.set(key, {
      entry,
      expiresAt: ttl === undefined ? Number.POSITIVE_INFINITY : Date.now() + ttl,
    });
  }

  delete(key: string): void {
    this.entries.delete(key);
    this.deletedAt.set(key, Date.now());
  }

  lock(key: string, ttl: number): number | undefined {
    const held = this.locks.get(key);
    if (held !== undefined && Date.now() < held.expiresAt) return undefined;
    const token = this.nextToken++;
    this.locks.set(key, { token, expiresAt: Date.now() + ttl });
    return token;
  }

  unlock(key: string, token: number, outcome: FillOutcome, carry = false): void {
    if (this.locks.get(key)?.token === token) this.locks.delete(key);
    // A commit's announcement carries what a read gives now, naming its holder.
    const announced = carry ? { holder: String(token), entry: this.read(key) } : undefined;
    for (const listener of [...(this.listeners.get(key) ?? [])]) listener(outcome, announced);
  }

  /** The token of the lock on `key`, while it is held. */
  holder(key: string): number | undefined {
    const held = this.locks.get(key);
    return held !== undefined && Date.now() < held.expiresAt ? held.token : undefined;
  }
}

export interface TestCacheOptions {
  name?: string;
  /** Answer with promises instead of values. */
  async?: boolean;
  /** Answer reads after this many ms (a timer), like a remote store. */
  readDelay?: number;
  /** Offer tryAcquireFillLock. */
  lock?: boolean;
  /** Offer onFillDone (push wake-up). */
  push?: boolean;
  /**
   * Offer tryAcquireFillLockAndRead and locks that commit (write, release and announce in one step,
   * the announcement carrying the entry); needs `lock`.
   */
  combined?: boolean;
  /** Offer hearsFillDone, answering this (needs `push`). */
  hears?: boolean;
  /** Offer invalidateTags. */
  tags?: boolean;
  backend?: Backend;
}

/** A Cache over a Map (or a shared Backend), to test the core without any adapter package. */
export function testCache(options: TestCacheOptions = {}): Cache & { calls: Calls; backend: Backend } {
  const backend = options.backend ?? new Backend();
  const calls: Calls = { get: 0, set: 0, delete: 0, lock: 0, release: [] };
  if (options.combined) Object.assign(calls, { lockAndRead: 0, commit: 0 });
  const answer = <T>(value: T): T | Promise<T> => (options.async ? Promise.resolve(value) : value);
  const cache: Cache & { calls: Calls; backend: Backend } = {
    name: options.name ?? 'test',
    calls,
    backend,
    get(key: string) {
      calls.get++;
      const delay = options.readDelay;
      if (delay === undefined) return answer(backend.read(key));
      return new Promise<CacheEntry | undefined>((resolve) =>
        setTimeout(() => resolve(backend.read(key)), delay),
      );
    },
    set(key: string, entry: CacheEntry, { ttl }: CacheSetOptions) {
      calls.set++;
      backend.write(key, entry, ttl);
      return answer(undefined);
    },
    delete(key: string) {
      calls.delete++;
      backend.delete(key);
      return answer(undefined);
    },
  };
  if (options.lock) {
    const handle = (key: string, token: number): FillLock => {
      let released = false;
      const lock: FillLock = {
        release(outcome) {
          if (released) return;
          released = true;
          calls.release.push(outcome);
          backend.unlock(key, token, outcome);
        },
        extend(extra) {
          const held = backend.locks.get(key);
          if (held?.token !== token) return false;
          held.expiresAt = Date.now() + extra;
          return true;
        },
      };
      if (options.combined) {
        lock.commit = (entry, { ttl }) => {
          calls.commit = (calls.commit ?? 0) + 1;
          backend.write(key, entry, ttl);
          released = true;
          backend.unlock(key, token, 'filled', true);
          return answer(backend.read(key) === entry);
        };
      }
      return lock;
    };
    cache.tryAcquireFillLock = (key: string, ttl: number) => {
      calls.lock++;
      const token = backend.lock(key, ttl);
      return answer(token === undefined ? undefined : handle(key, token));
    };
    if (options.combined) {
      cache.tryAcquireFillLockAndRead = (key: string, ttl: number) => {
        calls.lockAndRead = (calls.lockAndRead ?? 0) + 1;
        const token = backend.lock(key, ttl);
        const entry = backend.read(key);
        if (token !== undefined) return answer({ lock: handle(key, token), entry, holder: String(token) });
        return answer({ lock: undefined, entry, holder: String(backend.holder(key)) });
      };
    }
  }
  if (options.tags) {
    cache.invalidateTags = (tags) => {
      backend.invalidateTags(tags);
      return answer(undefined);
    };
  }
  if (options.push) {
    cache.onFillDone = (key, listener) => {
      let set = backend.listeners.get(key);
      if (set === undefined) {
        set = new Set();
        backend.listeners.set(key, set);
      }
      set.add(listener);
      return () => set.delete(listener);
    };
    const hears = options.hears;
    if (hears !== undefined) cache.hearsFillDone = () => hears;
  }
  return cache;
}

/** A promise with its settle functions exposed. */
export function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued microtask (and promise chain of reasonable depth) run. */
export async function flush(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}

/** The outcome of a promise without letting it reject unhandled. */
export function settle<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}
