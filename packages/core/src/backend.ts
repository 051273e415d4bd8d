import type { CacheEntry, CacheSetOptions, FillLock, FillOutcome } from './cache.js';
import { buildEntry } from './entry.js';
import { emit, hasListeners } from './events.js';
import type { ResolvedOptions } from './options.js';
import { raceTimeout } from './race-timeout.js';
import type { CacheState } from './registry.js';
import { ANSWERED_BY_L1, ANSWERED_BY_L2, isolatedRequests, type TierAnswers } from './shared.js';
import { reportBackendError } from './stats.js';
import { intervalFor } from './timers.js';

/** True for a promise or any thenable. */
export function isThenable<T>(value: unknown): value is PromiseLike<T> {
  return typeof value === 'object' && value !== null && typeof (value as PromiseLike<T>).then === 'function';
}

/**
 * {@link isThenable} for what a `Cache.get` answered: an entry, `undefined` or a promise of one. An
 * entry (every hit) is told apart by its own `freshUntil` first: looking up a `then` it does not have
 * walks its prototype chain, and on the hit path, where entries of many shapes pass (a fill's, a
 * decoded one, one with a fill time or tags), that lookup went megamorphic and cost more than the
 * rest of a tiered cache's L1 hit.
 */
export function isPendingRead(
  read: CacheEntry | undefined | PromiseLike<CacheEntry | undefined>,
): read is PromiseLike<CacheEntry | undefined> {
  if (read === undefined) return false;
  if (typeof (read as CacheEntry).freshUntil === 'number') return false;
  return isThenable(read);
}

/** Reads `key`; a throwing or rejecting backend is a miss and a counted backend error. */
export function readEntry(
  state: CacheState,
  key: string,
): CacheEntry | undefined | Promise<CacheEntry | undefined> {
  let read: ReturnType<CacheState['cache']['get']>;
  try {
    read = state.cache.get(key);
  } catch (error) {
    reportBackendError(state.name, 'get', key, error);
    return undefined;
  }
  if (!isPendingRead(read)) return read;
  return missOnRejection(state.name, key, read);
}

/**
 * An asynchronous read whose rejection is a miss (and a counted backend error). Kept apart from
 * {@link readEntry}: a function that creates a closure allocates the variables it captures on every
 * call, whichever branch runs, and every hit goes through `readEntry`.
 */
function missOnRejection(
  name: string,
  key: string,
  read: PromiseLike<CacheEntry | undefined>,
): Promise<CacheEntry | undefined> {
  return Promise.resolve(read).then(undefined, (error: unknown) => {
    reportBackendError(name, 'get', key, error);
    return undefined;
  });
}

/**
 * Reads `key` for a caller: an asynchronous read already in flight for the key is shared (250
 * concurrent callers cost one GET, hit or miss); a synchronous adapter is read directly.
 */
export function sharedRead(
  state: CacheState,
  key: string,
): CacheEntry | undefined | Promise<CacheEntry | undefined> {
  const { reads } = state;
  if (reads.size !== 0) {
    const pending = reads.get(key);
    if (pending !== undefined) {
      const answers = state.tierAnswers;
      return answers === undefined ? pending : sharedTierRead(state, answers, pending);
    }
  }
  const read = readEntry(state, key);
  if (read === undefined || !isPendingRead(read)) return read;
  return shareRead(state, key, read);
}

/**
 * A caller's share of a tiered cache's read in flight: the entry it finds counts in `l2Hits` (or
 * `l1Hits`, for an L1 that answers asynchronously) for this caller too, as it did for the caller
 * whose read it is, so that `hits <= l1Hits + l2Hits` holds per caller. An L1 copy the tiered cache
 * fell back on (the remote failed) was neither tier's hit, for any of them. The tiered cache records
 * the tier as its read settles, and these callbacks run right after it, before any later read.
 */
function sharedTierRead(
  state: CacheState,
  answers: TierAnswers,
  pending: Promise<CacheEntry | undefined>,
): Promise<CacheEntry | undefined> {
  return pending.then((entry) => {
    if (entry === undefined) return entry;
    const tier = answers.get(entry);
    if (tier === ANSWERED_BY_L2) state.counters.l2Hits++;
    else if (tier === ANSWERED_BY_L1) state.counters.l1Hits++;
    return entry;
  });
}

/** Registers an asynchronous read of `key` so that concurrent callers share it until it settles. */
export function shareRead(
  state: CacheState,
  key: string,
  read: Promise<CacheEntry | undefined>,
): Promise<CacheEntry | undefined> {
  // Where requests must not await each other's I/O (workerd), each caller keeps its own read.
  if (isolatedRequests()) return read;
  const { reads } = state;
  reads.set(key, read);
  // Registered before any caller's callback, so the read leaves the map before callers act on it.
  const forget = (): void => {
    if (reads.get(key) === read) reads.delete(key);
  };
  read.then(forget, forget);
  return read;
}

/** Reads `key` and always answers with a promise. */
export async function readEntryAsync(state: CacheState, key: string): Promise<CacheEntry | undefined> {
  return readEntry(state, key);
}

/**
 * The entry a fill that started at `createdAt` writes for `value` under `options`; `delta` is how
 * long the fill function ran (ms), when a fill produced the value.
 */
export function entryFor(
  value: unknown,
  createdAt: number,
  options: Pick<ResolvedOptions, 'ttl' | 'grace'> & { readonly tags?: readonly string[] | undefined },
  delta?: number,
): CacheEntry {
  const { ttl, grace, tags } = options;
  const freshUntil = ttl === undefined ? Number.POSITIVE_INFINITY : never(Date.now() + ttl);
  const staleUntil = ttl === undefined ? Number.POSITIVE_INFINITY : never(freshUntil + grace);
  // `delta` and `tags` only when present: without them the entry keeps the shape adapters have
  // always seen.
  return buildEntry(value, createdAt, freshUntil, staleUntil, delta, tags);
}

// Past 2^53 ms (some 285,000 years) a time is neither exact nor writable as an integer (a remote
// backend would be sent `1e+21`), and a lifetime that long means "forever" to any user.
function never(time: number): number {
  return time > Number.MAX_SAFE_INTEGER ? Number.POSITIVE_INFINITY : time;
}

/**
 * The backend's physical TTL for `options`: ttl + grace, or with fail-safe ttl + max(grace,
 * maxStale) (the entry must outlive its freshness to serve as a fallback); none without a ttl (also
 * when it would exceed 2^53 ms: no backend holds an entry that long, and a remote one could not be
 * told such a number).
 */
export function physicalTtl(
  options: Pick<ResolvedOptions, 'ttl' | 'grace'> & Partial<Pick<ResolvedOptions, 'failSafe'>>,
): number | undefined {
  if (options.ttl === undefined) return undefined;
  const keep =
    options.failSafe === undefined ? options.grace : Math.max(options.grace, options.failSafe.maxStale);
  const ttl = options.ttl + keep;
  return ttl > Number.MAX_SAFE_INTEGER ? undefined : ttl;
}

/**
 * How long the core waits for an asynchronous write before giving up on it (reported as a `set`
 * fault). Adapters bound their own calls more tightly (1 s by default for Redis and Upstash); this
 * guard keeps a caller from waiting forever on an adapter that does not.
 */
export const WRITE_GUARD_MS = 5_000;

/**
 * Writes an entry. A failing (or, past {@link WRITE_GUARD_MS}, hanging) write is a counted backend
 * error, never a failed call. Returns `undefined` when the write finished synchronously, else a
 * promise that never rejects. `renews`: see `CacheSetOptions.renews`.
 */
export function writeEntry(
  state: CacheState,
  key: string,
  entry: CacheEntry,
  ttl: number | undefined,
  renews?: CacheEntry,
  afterInvalidations?: true,
): Promise<void> | undefined {
  try {
    const options: CacheSetOptions =
      renews !== undefined ? { ttl, renews } : afterInvalidations ? { ttl, afterInvalidations } : { ttl };
    const written = state.cache.set(key, entry, options);
    if (isThenable(written)) {
      return raceTimeout(
        Promise.resolve(written),
        WRITE_GUARD_MS,
        () => new Error(`cache.set for '${key}' did not settle within ${WRITE_GUARD_MS}ms`),
      ).then(undefined, (error: unknown) => {
        reportBackendError(state.name, 'set', key, error);
      });
    }
  } catch (error) {
    reportBackendError(state.name, 'set', key, error);
  }
  return undefined;
}

/** Tries the fill lock; a fault is reported and answered as `'error'` (the caller fills locally). */
export async function tryLock(
  state: CacheState,
  key: string,
  ttl: number,
): Promise<FillLock | undefined | 'error'> {
  try {
    // biome-ignore lint/style/noNonNullAssertion: only called for caches that have the capability
    return (await state.cache.tryAcquireFillLock!(key, ttl)) ?? undefined;
  } catch (error) {
    reportBackendError(state.name, 'lock', key, error);
    return 'error';
  }
}

/**
 * A lock attempt: the lock (or not), with what the attempt learnt of the key. `read` holds the entry
 * when the cache read it in the same step (`tryAcquireFillLockAndRead`), and is `undefined` when it
 * did not (the caller then reads itself if it needs to); `holder` is who held the lock, if known.
 */
export interface LockAttempt {
  readonly lock: FillLock | undefined;
  readonly read: { readonly entry: CacheEntry | undefined } | undefined;
  readonly holder: string | undefined;
}

/**
 * Tries the fill lock and, where the cache can do both in one step, reads the key with it. A fault
 * is reported (as a `lock` fault: the attempt failed, whatever part of it) and answered `'error'`.
 */
export async function tryLockAndRead(
  state: CacheState,
  key: string,
  ttl: number,
): Promise<LockAttempt | 'error'> {
  const { cache } = state;
  if (cache.tryAcquireFillLockAndRead === undefined) {
    const lock = await tryLock(state, key, ttl);
    return lock === 'error' ? lock : { lock, read: undefined, holder: undefined };
  }
  try {
    const attempt = await cache.tryAcquireFillLockAndRead(key, ttl);
    return { lock: attempt.lock ?? undefined, read: { entry: attempt.entry }, holder: attempt.holder };
  } catch (error) {
    reportBackendError(state.name, 'lock', key, error);
    return 'error';
  }
}

/**
 * Writes `entry` and releases `lock` as `'filled'` in one step (`FillLock.commit`). A failing (or,
 * past {@link WRITE_GUARD_MS}, hanging) commit is reported as a `set` fault, `failed` is called
 * (the value was not written: its flight leaves the registry, so that nobody joins it while the
 * release runs, which an adapter may retry until the lock would lapse), and the lock is then
 * released on its own (a no-op if the commit did land). Never rejects.
 */
export async function commitEntry(
  state: CacheState,
  key: string,
  lock: FillLock,
  entry: CacheEntry,
  options: CacheSetOptions,
  failed?: () => void,
): Promise<void> {
  try {
    // biome-ignore lint/style/noNonNullAssertion: only called for locks that have the capability
    const committed = lock.commit!(entry, options);
    if (isThenable(committed)) {
      await raceTimeout(
        Promise.resolve(committed),
        WRITE_GUARD_MS,
        () => new Error(`the commit of '${key}' did not settle within ${WRITE_GUARD_MS}ms`),
      );
    }
    return;
  } catch (error) {
    reportBackendError(state.name, 'set', key, error);
  }
  failed?.();
  await releaseLock(state, key, lock, 'filled');
}

/** Releases a lock; a fault is reported, never thrown (the lock lapses after its TTL anyway). */
export async function releaseLock(
  state: CacheState,
  key: string,
  lock: FillLock,
  outcome: FillOutcome,
): Promise<void> {
  try {
    await lock.release(outcome);
  } catch (error) {
    reportBackendError(state.name, 'release', key, error);
  }
}

/**
 * Extends `lock` every `ttl / 3` ms until the returned function is called. The period is clamped
 * to the timer limit (about 24.8 days): a longer one would overflow and extend in a tight loop, and
 * extending earlier than needed is harmless.
 */
export function keepLockAlive(state: CacheState, key: string, lock: FillLock, ttl: number): () => void {
  const extend = lock.extend;
  if (extend === undefined) return () => {};
  let stopped = false;
  const timer = setInterval(
    () => {
      if (stopped) return;
      Promise.resolve()
        .then(() => extend.call(lock, ttl))
        .then(
          (held) => {
            if (held !== false || stopped) return;
            stopped = true;
            if (hasListeners()) {
              emit({
                type: 'warning',
                cache: state.name,
                message: `stampede: the fill lock for '${key}' was lost while its fill ran; another replica may fill it too`,
              });
            }
          },
          (error: unknown) => reportBackendError(state.name, 'extend', key, error),
        );
    },
    intervalFor(ttl / 3),
  );
  (timer as { unref?: () => void }).unref?.();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
