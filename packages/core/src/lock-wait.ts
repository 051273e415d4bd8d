import { readEntryAsync, tryLock } from './backend.js';
import type { CacheEntry, FillLock, FillOutcome } from './cache.js';
import { emit, hasListeners, type LockWaitEvent } from './events.js';
import { LOCK_POLL_CEILING, type ResolvedOptions } from './options.js';
import type { CacheState } from './registry.js';
import { setLongTimeout } from './timers.js';

/** How the lock protocol ended for one fill. */
export type LockWaitResult =
  | { readonly kind: 'value'; readonly entry: CacheEntry }
  | { readonly kind: 'lock'; readonly lock: FillLock }
  | { readonly kind: 'local' }
  | { readonly kind: 'aborted' };

function lockWaitEvent(
  state: CacheState,
  key: string,
  startedAt: number,
  outcome: LockWaitEvent['outcome'],
): void {
  if (hasListeners()) {
    emit({ type: 'lock-wait', cache: state.name, key, durationMs: Date.now() - startedAt, outcome });
  }
}

/**
 * Takes the fleet's fill lock for `key`, or waits for the replica that holds it to write the value.
 * While waiting: sleeps from `lockPollInterval`, doubling to a 1 s ceiling, then reads the cache and
 * tries the lock again, so a crashed holder is replaced once its lock lapses. A push notice
 * (`onFillDone`) cuts a sleep short, and its `ready` acknowledgement triggers one read at once (a
 * fill that ended while the subscription was being made was announced to no one); after a failed
 * fill the waiter contends again at once. Neither a value nor the lock within `lockWaitTimeout`, or
 * a backend fault: `'local'`, fill without the lock (bounded extra work, never unavailability); a
 * fault that ends a started wait is a `lockWaitErrors` count and a `lock-wait` event with outcome
 * `'error'`. `signal` aborting (the flight was given up): `'aborted'`.
 */
export async function acquireOrWait(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  signal: AbortSignal,
): Promise<LockWaitResult> {
  const { counters } = state;
  const first = await tryLock(state, key, options.lockTtl);
  // A fault before any contention is no wait: it is a `backendErrors` count (and a `backend-error`
  // event) only, with no `lock-wait` event and no `lockWaitErrors`.
  if (first === 'error') return { kind: 'local' };
  if (first !== undefined) {
    counters.lockAcquired++;
    return { kind: 'lock', lock: first };
  }
  counters.lockContended++;
  const startedAt = Date.now();
  const deadline = startedAt + options.lockWaitTimeout;
  let delay = options.lockPollInterval;
  let notice: FillOutcome | undefined;
  // The subscription was acknowledged and no read has followed yet. A holder whose fill ended
  // between our lost `SET NX` and the acknowledgement announced it to no one; without this read the
  // waiter would sleep a whole `lockPollInterval` for a value already written.
  let confirmed = false;
  let wake: (() => void) | undefined;
  let stopListening: (() => void) | undefined;
  try {
    stopListening = state.cache.onFillDone?.(
      key,
      (outcome) => {
        notice = outcome;
        wake?.();
      },
      () => {
        confirmed = true;
        wake?.();
      },
    );
  } catch {
    // Push wake-up is an optimisation; polling alone is still correct.
  }
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
  try {
    for (;;) {
      if (signal.aborted) {
        lockWaitEvent(state, key, startedAt, 'aborted');
        return { kind: 'aborted' };
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        counters.lockWaitTimeouts++;
        lockWaitEvent(state, key, startedAt, 'timeout');
        return { kind: 'local' };
      }
      const slept = notice === undefined && !confirmed ? await nap(Math.min(delay, remaining)) : false;
      if (signal.aborted) continue;
      const heard = notice;
      notice = undefined;
      // Woken by the acknowledgement alone: one read, no lock attempt (the holder is most likely
      // still filling, and its announcement will now be heard) and no doubling of the poll delay.
      const onlyConfirmed = confirmed && heard === undefined && !slept;
      confirmed = false;
      if (!onlyConfirmed) delay = Math.min(delay * 2, LOCK_POLL_CEILING);
      if (heard !== 'failed') {
        const entry = await readEntryAsync(state, key);
        // Given up while reading (every caller left, or fillTimeout): the loop's top says so.
        if (signal.aborted) continue;
        if (entry !== undefined && Date.now() < entry.freshUntil) {
          // Counted by the caller (`lockWaitHits`), which knows whether the flight still wanted it.
          lockWaitEvent(state, key, startedAt, 'hit');
          return { kind: 'value', entry };
        }
      }
      if (onlyConfirmed) continue;
      const lock = await tryLock(state, key, options.lockTtl);
      if (lock === 'error') {
        // A wait that had started and ended on a backend fault: counted and timed like the others,
        // so the lock-wait histogram does not miss exactly the waits that went wrong.
        counters.lockWaitErrors++;
        lockWaitEvent(state, key, startedAt, 'error');
        return { kind: 'local' };
      }
      if (lock !== undefined) {
        counters.lockAcquired++;
        lockWaitEvent(state, key, startedAt, 'acquired');
        return { kind: 'lock', lock };
      }
    }
  } finally {
    stopListening?.();
  }
}
