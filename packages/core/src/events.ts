import { shared } from './shared.js';

/** A fill ran (in the foreground or as a stale-while-revalidate refresh). */
export interface FillEvent {
  readonly type: 'fill';
  /** The cache's name. */
  readonly cache: string;
  readonly key: string;
  /** How long the fill took, in milliseconds of `Date.now()`. */
  readonly durationMs: number;
  /** `'ok'`, `'error'` (the fill threw) or `'timeout'` (`fillTimeout` passed first). */
  readonly outcome: 'ok' | 'error' | 'timeout';
  /** True for a background stale-while-revalidate refresh. */
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
   * `'error'`: a lock attempt during the wait failed (a backend fault) and this replica filled locally.
   * A fault on the first lock attempt, before any contention, is no wait and emits no `lock-wait`.
   */
  readonly outcome: 'hit' | 'acquired' | 'timeout' | 'aborted' | 'error';
}

/** The operations a backend fault can come from. */
export type BackendOperation =
  | 'get'
  | 'set'
  | 'delete'
  | 'lock'
  | 'release'
  | 'extend'
  | 'decode'
  | 'encode'
  | 'subscribe'
  | 'publish'
  | 'tags';

/** A backend call failed or timed out; the request went on without it. */
export interface BackendErrorEvent {
  readonly type: 'backend-error';
  readonly cache: string;
  readonly key: string | undefined;
  readonly operation: BackendOperation;
  readonly error: unknown;
}

/** A stale read wanted a background refresh but the process-wide cap was reached. */
export interface RefreshSkippedEvent {
  readonly type: 'refresh-skipped';
  readonly cache: string;
  readonly key: string;
}

/** Something the user should know once (for example: the lock was asked of a cache without one). */
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

/** Every event stampede emits. */
export type StampedeEvent =
  | FillEvent
  | LockWaitEvent
  | BackendErrorEvent
  | RefreshSkippedEvent
  | WarningEvent
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
 * Registers a listener for every {@link StampedeEvent} in this process.
 *
 * @returns a function that removes the listener
 * @example
 * const off = onStampedeEvent((e) => { if (e.type === 'fill') console.log(e.key, e.durationMs) });
 */
export function onStampedeEvent(listener: StampedeListener): () => void {
  if (typeof listener !== 'function') throw new TypeError('listener must be a function');
  listeners.push(listener);
  return () => {
    const at = listeners.indexOf(listener);
    if (at !== -1) listeners.splice(at, 1);
  };
}

/** Sends `event` to every listener. */
export function emit(event: StampedeEvent): void {
  for (const listener of listeners.slice()) {
    try {
      listener(event);
    } catch {
      // A listener's bug must never fail the request that produced the event.
    }
  }
}
