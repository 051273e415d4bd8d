import { readEntryAsync, tryLockAndRead } from './backend.js';
import type { CacheEntry, FillAnnouncement, FillLock, FillOutcome } from './cache.js';
import { emit, hasListeners, type LockWaitEvent } from './events.js';
import { LOCK_POLL_CEILING, type ResolvedOptions } from './options.js';
import type { CacheState } from './registry.js';
import { reportBackendError } from './stats.js';
import { setLongTimeout } from './timers.js';

/** How the lock protocol ended for one fill. */
export type LockWaitResult =
  | { readonly kind: 'value'; readonly entry: CacheEntry }
  | {
      readonly kind: 'lock';
      readonly lock: FillLock;
      /** The key as read in the same step as the lock (`tryAcquireFillLockAndRead`), if it was. */
      readonly read: { readonly entry: CacheEntry | undefined } | undefined;
    }
  | { readonly kind: 'local' }
  | { readonly kind: 'aborted' }
  | { readonly kind: 'yielded' };

/** What the flight knows before it contends for the lock. */
export interface WaitHint {
  /**
   * The entry this replica read before starting its fill, if any. Its `delta` (how long the fill
   * that produced it ran) tells when the holder of the lock is likely to be done.
   */
  readonly previous: CacheEntry | undefined;
  /**
   * An early refresh (`earlyRefresh`): `previous` is still fresh, so only a newer entry is the
   * holder's value, and a refresh that loses the lock does not wait it out (see {@link acquireOrWait}).
   */
  readonly early: boolean;
  /**
   * The `createdAt` of an entry another replica wrote that this flight's `checkValue` refused, if
   * any: only a newer entry is the holder's value (the holder may be filling one the check passes).
   */
  readonly refusedAt?: number | undefined;
  /**
   * For an early refresh: whether a caller now waits on it (a miss joined it: a caller whose own
   * `checkValue` refused the still-fresh value). Such a refresh does not leave the key to the lock's
   * holder with the old value: it waits for the holder's, like any other.
   */
  readonly waited?: (() => boolean) | undefined;
}

/**
 * When a replica that lost the lock at `lostAt` first looks for the holder's value: the holder took
 * the lock no later than that, its fill ran `delta` ms last time, and after its fill it writes (and,
 * on a cache that cannot read with the lock attempt, double-checks the cache before it): two round
 * trips at most, each taken to be as long as this replica's own lost lock attempt
 * (`lostAt - triedAt`). `undefined` without a known `delta`.
 */
export function expectedFinish(
  previous: CacheEntry | undefined,
  triedAt: number,
  lostAt: number,
): number | undefined {
  const delta = previous?.delta;
  if (delta === undefined || !(delta >= 0)) return undefined;
  return lostAt + delta + 2 * Math.max(0, lostAt - triedAt);
}

function lockWaitEvent(
  state: CacheState,
  key: string,
  startedAt: number,
  outcome: LockWaitEvent['outcome'],
): void {
  if (hasListeners()) {
    // Never negative, even when the clock was set back meanwhile.
    const durationMs = Math.max(0, Date.now() - startedAt);
    emit({ type: 'lock-wait', cache: state.name, key, durationMs, outcome });
  }
}

/**
 * Takes the fleet's fill lock for `key`, or waits for the replica that holds it to write the value.
 * While waiting: sleeps until the holder's expected finish ({@link expectedFinish}, when the entry
 * read before has a `delta`) or else `lockPollInterval`, then from `lockPollInterval` doubling to a
 * 1 s ceiling; after each sleep it reads the cache and tries the lock again, so a crashed holder is
 * replaced once its lock lapses. Where the cache offers `tryAcquireFillLockAndRead`, every lock
 * attempt reads the key in the same step: a lost attempt that finds another replica's value ends the
 * wait at once, and a won one carries the holder's double-check read. A push notice (`onFillDone`)
 * cuts a sleep short; when it carries the value of the holder this waiter lost to, that value is
 * taken without a read. Listening starts before the first lock attempt where the cache already hears
 * the key (`hearsFillDone`), else after the lost attempt, and then the subscription's `ready`
 * acknowledgement triggers one read at once (a fill that ended while the subscription was being made
 * was announced to no one); after a failed fill the waiter contends again at once. Neither a value
 * nor the lock within `lockWaitTimeout`, or a backend fault: `'local'`, fill without the lock
 * (bounded extra work, never unavailability); a fault that ends a started wait is a `lockWaitErrors`
 * count and a `lock-wait` event with outcome `'error'`. `signal` aborting (the flight was given up):
 * `'aborted'`.
 *
 * An early refresh (`hint.early`) that loses the lock does not wait for the holder: its callers
 * already have a fresh value. It sleeps once (until the holder's expected finish), reads once, and
 * ends: `'value'` if the holder's newer entry is there, else `'yielded'`; it never takes the lock
 * over nor fills without it. Meanwhile its flight keeps this process from contending again for the
 * key on every hit. Only if the value it meant to replace has expired by then (a holder slower than
 * its `delta`: callers of this process may have missed and joined the flight) does it go on waiting
 * as any lock loser does.
 */
export async function acquireOrWait(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  signal: AbortSignal,
  hint?: WaitHint,
): Promise<LockWaitResult> {
  const { counters, cache } = state;
  const previous = hint?.previous;
  // For an early refresh, the createdAt the holder's value must be newer than.
  const newerThan = hint?.early === true && previous !== undefined ? previous.createdAt : hint?.refusedAt;
  // The holder's value: fresh, and for an early refresh newer than the still-fresh entry it had (or
  // than an entry the check refused).
  const isHolders = (entry: CacheEntry | undefined): entry is CacheEntry =>
    entry !== undefined &&
    Date.now() < entry.freshUntil &&
    (newerThan === undefined || entry.createdAt > newerThan);
  let notice: FillOutcome | undefined;
  // What the last announcement carried (the holder's value), if anything.
  let announced: FillAnnouncement | undefined;
  // The subscription was acknowledged and no read has followed yet. A holder whose fill ended
  // between our lost lock attempt and the acknowledgement announced it to no one; without this read
  // the waiter would sleep a whole `lockPollInterval` for a value already written.
  let confirmed = false;
  let wake: (() => void) | undefined;
  let stopListening: (() => void) | undefined;
  const listen = (confirm: boolean): void => {
    try {
      stopListening = cache.onFillDone?.(
        key,
        (outcome, carried) => {
          notice = outcome;
          announced = carried;
          wake?.();
        },
        confirm
          ? () => {
              confirmed = true;
              wake?.();
            }
          : undefined,
      );
    } catch (error) {
      // Push wake-up is an optimisation; polling alone is still correct, but slower: an adapter
      // whose `onFillDone` throws is counted and reported, not left unseen.
      reportBackendError(state.name, 'subscribe', key, error);
    }
  };
  // Where the key's subscription is already acknowledged, listening starts before the lock attempt:
  // an announcement after it cannot be missed, so a lost attempt needs no confirming read.
  let hears = false;
  try {
    hears = cache.onFillDone !== undefined && cache.hearsFillDone?.(key) === true;
  } catch (error) {
    // Then it listens after losing, as without the capability.
    reportBackendError(state.name, 'subscribe', key, error);
  }
  if (hears) listen(false);
  try {
    return await contend();
  } finally {
    stopListening?.();
  }

  async function contend(): Promise<LockWaitResult> {
    const triedAt = Date.now();
    const first = await tryLockAndRead(state, key, options.lockTtl);
    // A fault before any contention is no wait: it is a `backendErrors` count (and a `backend-error`
    // event) only, with no `lock-wait` event and no `lockWaitErrors`.
    // An early refresh is not needed yet: on a fault it leaves the key to the fills at its expiry.
    if (first === 'error')
      return hint?.early === true && hint.waited?.() !== true ? { kind: 'yielded' } : { kind: 'local' };
    if (first.lock !== undefined) {
      counters.lockAcquired++;
      return { kind: 'lock', lock: first.lock, read: first.read };
    }
    counters.lockContended++;
    const startedAt = Date.now();
    // The lock attempt read the key too, and another replica's value is already there.
    const found = first.read?.entry;
    if (isHolders(found)) {
      lockWaitEvent(state, key, startedAt, 'hit');
      return { kind: 'value', entry: found };
    }
    // Who holds the lock: only its announcement's value is taken without reading (it committed
    // after our attempt, so after our read).
    let holder = first.holder;
    if (!hears) listen(true);
    const deadline = startedAt + options.lockWaitTimeout;
    // An early refresh leaves the key to the holder while its value is still fresh. Past its expiry,
    // misses may have joined the flight: it then waits like any other.
    const mayYield = (): boolean =>
      hint?.early === true &&
      previous !== undefined &&
      Date.now() < previous.freshUntil &&
      hint.waited?.() !== true;
    // The first sleep ends at the holder's expected finish, when known; the poll schedule follows.
    let target = expectedFinish(previous, triedAt, startedAt);
    let delay = options.lockPollInterval;
    /** Sleeps `ms`, or less when woken or aborted; resolves `true` when the full `ms` passed. */
    const nap = (ms: number): Promise<boolean> =>
      new Promise((resolve) => {
        const finish = (slept: boolean): void => {
          timer.clear();
          signal.removeEventListener('abort', cut);
          wake = undefined;
          resolve(slept);
        };
        const cut = (): void => finish(false);
        // lockPollInterval and lockWaitTimeout may exceed the 24.8-day timer limit.
        const timer = setLongTimeout(() => finish(true), ms);
        wake = cut;
        signal.addEventListener('abort', cut, { once: true });
      });
    for (;;) {
      if (signal.aborted) {
        lockWaitEvent(state, key, startedAt, 'aborted');
        return { kind: 'aborted' };
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0 && mayYield()) {
        lockWaitEvent(state, key, startedAt, 'yielded');
        return { kind: 'yielded' };
      }
      if (remaining <= 0) {
        counters.lockWaitTimeouts++;
        lockWaitEvent(state, key, startedAt, 'timeout');
        return { kind: 'local' };
      }
      let ms = delay;
      if (target !== undefined) {
        const until = target - Date.now();
        if (until > 0) ms = until;
        else target = undefined;
      }
      const slept = notice === undefined && !confirmed ? await nap(Math.min(ms, remaining)) : false;
      if (signal.aborted) continue;
      const heard = notice;
      const carried = announced;
      notice = undefined;
      announced = undefined;
      // Woken by the acknowledgement alone: one read, no lock attempt (the holder is most likely
      // still filling, and its announcement will now be heard) and no doubling of the poll delay.
      const onlyConfirmed = confirmed && heard === undefined && !slept;
      confirmed = false;
      if (!onlyConfirmed) {
        // The expected finish is used once; the poll schedule then starts at lockPollInterval.
        if (target !== undefined) target = undefined;
        else delay = Math.min(delay * 2, LOCK_POLL_CEILING);
      }
      if (heard !== 'failed') {
        // The holder we lost to announced its value: no read. Another holder's announcement (an
        // earlier fill's, delivered late) may predate a delete our read saw, so it is read instead.
        const entry =
          heard === 'filled' &&
          carried?.entry !== undefined &&
          holder !== undefined &&
          carried.holder === holder
            ? carried.entry
            : await readEntryAsync(state, key);
        // Given up while reading (every caller left, or fillTimeout): the loop's top says so.
        if (signal.aborted) continue;
        // An early refresh's previous entry is still fresh: only a newer one is the holder's value.
        if (isHolders(entry)) {
          // Counted by the caller (`lockWaitHits`), which knows whether the flight still wanted it.
          lockWaitEvent(state, key, startedAt, 'hit');
          return { kind: 'value', entry };
        }
      }
      if (onlyConfirmed) continue;
      if (mayYield()) {
        lockWaitEvent(state, key, startedAt, 'yielded');
        return { kind: 'yielded' };
      }
      const attempt = await tryLockAndRead(state, key, options.lockTtl);
      if (attempt === 'error') {
        // A wait that had started and ended on a backend fault: counted and timed like the others,
        // so the lock-wait histogram does not miss exactly the waits that went wrong.
        counters.lockWaitErrors++;
        lockWaitEvent(state, key, startedAt, 'error');
        return { kind: 'local' };
      }
      if (attempt.lock !== undefined) {
        counters.lockAcquired++;
        lockWaitEvent(state, key, startedAt, 'acquired');
        return { kind: 'lock', lock: attempt.lock, read: attempt.read };
      }
      holder = attempt.holder;
      const written = attempt.read?.entry;
      if (isHolders(written)) {
        lockWaitEvent(state, key, startedAt, 'hit');
        return { kind: 'value', entry: written };
      }
    }
  }
}
