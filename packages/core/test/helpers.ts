import type { Cache, CacheEntry, CacheSetOptions, FillLock, FillOutcome } from '../src/index.js';

/** What a test cache saw. */
export interface Calls {
  get: number;
  set: number;
  delete: number;
  lock: number;
  release: FillOutcome[];
}

/** A shared "server" that several test caches (replicas) can point at. */
export class Backend {
  readonly entries = new Map<string, { entry: CacheEntry; expiresAt: number }>();
  readonly locks = new Map<string, { token: number; expiresAt: number }>();
  readonly listeners = new Map<string, Set<(outcome: FillOutcome) => void>>();
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

  unlock(key: string, token: number, outcome: FillOutcome): void {
    if (this.locks.get(key)?.token === token) this.locks.delete(key);
    for (const listener of this.listeners.get(key) ?? []) listener(outcome);
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
  /** Offer invalidateTags. */
  tags?: boolean;
  backend?: Backend;
}

/** A Cache over a Map (or a shared Backend), to test the core without any adapter package. */
export function testCache(options: TestCacheOptions = {}): Cache & { calls: Calls; backend: Backend } {
  const backend = options.backend ?? new Backend();
  const calls: Calls = { get: 0, set: 0, delete: 0, lock: 0, release: [] };
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
    cache.tryAcquireFillLock = (key: string, ttl: number) => {
      calls.lock++;
      const token = backend.lock(key, ttl);
      if (token === undefined) return answer(undefined);
      const lock: FillLock = {
        release(outcome) {
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
      return answer(lock);
    };
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
