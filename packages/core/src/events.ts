import { messageOf } from './errors.js';
import { shared } from './shared.js';

/** A fill ran (in the foreground, or as a stale-while-revalidate or early refresh). */
export interface FillEvent {
  readonly type: 'fill';
  /** The cache's name. */
  readonly cache: string;
  readonly key: string;
  /** How long the fill took, in milliseconds of `Date.now()`. */
  readonly durationMs: number;
  /**
   * `'ok'`, `'error'` (the fill threw) or `'timeout'` (`fillTimeout` passed while it ran). A fill
   * whose callers all left still reports how it ended; a flight whose `fillTimeout` passed during
   * its lock wait ran no fill and emits none (it counts in `fillTimeouts` and `fillsCancelled`).
   */
  readonly outcome: 'ok' | 'error' | 'timeout';
  /** True for a background refresh (stale-while-revalidate, or `earlyRefresh`). */
  readonly background: boolean;
}

/** A replica lost the fill lock and waited; this is how the wait ended. */
export interface LockWaitEvent {
  readonly type: 'lock-wait';
  /** The cache's name. */
  readonly cache: string;
  /** The key waited for (events carry keys; metrics never label by them). */
  readonly key: string;
  /** From the first lost lock attempt to the end of the wait, in milliseconds of `Date.now()`. */
  readonly durationMs: number;
  /**
   * `'hit'`: another replica's value arrived; `'acquired'`: this replica took the lock over;
   * `'timeout'`: `lockWaitTimeout` passed and this replica filled locally; `'aborted'`: every caller left;
   * `'error'`: a lock attempt during the wait failed (a backend fault) and this replica filled locally;
   * `'yielded'`: an early refresh found the lock taken, looked once at the holder's expected finish,
   * found no newer value yet and left the refresh to the holder (this replica keeps serving its value).
   * A fault on the first lock attempt, before any contention, is no wait and emits no `lock-wait`.
   */
  readonly outcome: 'hit' | 'acquired' | 'timeout' | 'aborted' | 'error' | 'yielded';
}

/**
 * The operations a backend fault can come from, as a list (`reportBackendError` checks against it).
 * `'warm-up'` is an adapter's preparation when it is created (loading scripts, opening its
 * subscriber).
 */
export const BACKEND_OPERATIONS = [
  'get',
  'set',
  'delete',
  'lock',
  'release',
  'extend',
  'decode',
  'encode',
  'subscribe',
  'publish',
  'tags',
  'warm-up',
] as const;

/** The operations a backend fault can come from (see {@link BACKEND_OPERATIONS}). */
export type BackendOperation = (typeof BACKEND_OPERATIONS)[number];

/** A backend call failed or timed out; the request went on without it. */
export interface BackendErrorEvent {
  readonly type: 'backend-error';
  readonly cache: string;
  readonly key: string | undefined;
  readonly operation: BackendOperation;
  readonly error: unknown;
}

/** A stale read (or an early refresh's draw) wanted a background refresh but the process-wide cap was reached. */
export interface RefreshSkippedEvent {
  readonly type: 'refresh-skipped';
  readonly cache: string;
  readonly key: string;
  /** True when the refresh was an early one (`earlyRefresh`, counted in `earlyRefreshesSkipped`). */
  readonly early?: boolean | undefined;
}

/** A fresh hit started a refresh ahead of expiry (`earlyRefresh`). */
export interface EarlyRefreshEvent {
  readonly type: 'early-refresh';
  readonly cache: string;
  readonly key: string;
  /** How long the value had left to be fresh, in milliseconds. */
  readonly remainingMs: number;
  /** The duration of the fill that produced the value (the entry's `delta`), in milliseconds. */
  readonly deltaMs: number;
}

/**
 * Something the user should know once (for example: the lock was asked of a cache without one),
 * emitted once per cache. It is also written with `console.warn`, once per process for a given text.
 */
export interface WarningEvent {
  readonly type: 'warning';
  readonly cache: string;
  readonly message: string;
}

/**
 * A value failed `checkValue`: a cached one (`source: 'cache'`, read as a miss and filled again) or
 * a fill's result (`source: 'fill'`, not cached; its callers get a `CacheFillError`).
 */
export interface CheckValueEvent {
  readonly type: 'check-value';
  readonly cache: string;
  readonly key: string;
  readonly source: 'cache' | 'fill';
  /** What the validator reported (a Standard Schema's issues, or the function's message). */
  readonly issues: ReadonlyArray<{ readonly message: string }>;
}

/** `invalidateTag`/`invalidateTags` invalidated these tags. */
export interface TagInvalidationEvent {
  readonly type: 'tag-invalidation';
  readonly cache: string;
  readonly tags: readonly string[];
}

/**
 * Fail-safe answered for a fill that failed: its callers got the previous value instead of an error,
 * and the value was re-armed fresh for `throttle` (see `GetOrComputeOptions.failSafe`).
 */
export interface FailSafeEvent {
  readonly type: 'fail-safe';
  /** The cache's name. */
  readonly cache: string;
  readonly key: string;
  /** `'error'`: the fill threw or rejected; `'timeout'`: `fillTimeout` passed first. */
  readonly reason: 'error' | 'timeout';
  /** How long past the end of its freshness the previous value is, in ms (0 for a re-armed one still fresh). */
  readonly staleMs: number;
  /** True when the failing fill was a background refresh (stale-while-revalidate, or after a soft timeout). */
  readonly background: boolean;
}

/**
 * A fill ran past `softTimeout`: its callers got the previous value and the fill goes on in the
 * background (see `GetOrComputeOptions.softTimeout`).
 */
export interface SoftTimeoutEvent {
  readonly type: 'soft-timeout';
  /** The cache's name. */
  readonly cache: string;
  readonly key: string;
  /** How long the callers waited, from the start of the fill (lock wait included), in ms. */
  readonly durationMs: number;
}

/**
 * A tiered cache's invalidation bus reconnected: bus messages may have been missed while it was
 * down, so the local cache (L1) was cleared and the next reads go to the remote cache.
 */
export interface BusRecoveryEvent {
  readonly type: 'bus-recovery';
  /** The tiered cache's name. */
  readonly cache: string;
}

/** Every event stampede emits. */
export type StampedeEvent =
  | FillEvent
  | LockWaitEvent
  | BackendErrorEvent
  | RefreshSkippedEvent
  | EarlyRefreshEvent
  | WarningEvent
  | FailSafeEvent
  | SoftTimeoutEvent
  | BusRecoveryEvent
  | CheckValueEvent
  | TagInvalidationEvent;

/** Receives {@link StampedeEvent}s. A listener that throws is ignored (it never fails a request). */
export type StampedeListener = (event: StampedeEvent) => void;

// Shared by every copy of the core loaded in this process (see shared.ts).
const listeners: StampedeListener[] = shared.listeners;

/** True while at least one listener is registered (lets hot paths skip building events). */
export function hasListeners(): boolean {
  return listeners.length !== 0;
}

/**
 * Registers a listener for every {@link StampedeEvent} in this process. A listener that throws, or
 * returns a promise that rejects (an `async` listener), never fails a request: it is said once on the
 * console and stays registered.
 *
 * @returns a function that removes this registration (calling it again does nothing; a listener
 *   registered twice is called twice until both are removed)
 * @example
 * const off = onStampedeEvent((e) => { if (e.type === 'fill') console.log(e.key, e.durationMs) });
 */
export function onStampedeEvent(listener: StampedeListener): () => void {
  if (typeof listener !== 'function') throw new TypeError('listener must be a function');
  listeners.push(listener);
  let registered = true;
  return () => {
    if (!registered) return;
    registered = false;
    const at = listeners.indexOf(listener);
    if (at !== -1) listeners.splice(at, 1);
  };
}

/** Sends `event` to every listener. */
export function emit(event: StampedeEvent): void {
  for (const listener of listeners.slice()) {
    let returned: unknown;
    try {
      returned = listener(event);
    } catch (error) {
      listenerFailed(listener, event, 'threw', error);
      continue;
    }
    // An async listener's rejection would otherwise be an unhandled rejection: the process ends.
    // Asking whether it returned a promise runs its code too (a `then` getter, a Proxy's traps).
    let thenable: boolean;
    try {
      thenable =
        typeof returned === 'object' &&
        returned !== null &&
        typeof (returned as PromiseLike<unknown>).then === 'function';
    } catch (error) {
      listenerFailed(listener, event, 'returned a value whose `then` threw', error);
      continue;
    }
    if (thenable) {
      Promise.resolve(returned).then(undefined, (error: unknown) =>
        listenerFailed(listener, event, 'rejected', error),
      );
    }
  }
}

/**
 * A listener's bug must never fail the request that produced the event, nor go unseen (a metrics
 * listener that throws would leave its figures silently wrong): said once per listener, on the
 * console only (a `warning` event would go back to the listener that threw).
 */
function listenerFailed(listener: StampedeListener, event: StampedeEvent, how: string, error: unknown): void {
  if (warnedListeners.has(listener)) return;
  warnedListeners.add(listener);
  console.warn(
    `stampede: an onStampedeEvent listener ${how} on a '${event.type}' event (${messageOf(error)}); it stays registered, and its later errors are not reported.`,
  );
}

const warnedListeners = new WeakSet<StampedeListener>();
