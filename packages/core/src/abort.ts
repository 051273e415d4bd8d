// Callers' own signals: one `abort` listener per signal, however many calls wait with it.
//
// A request handler commonly passes its request's signal to every lookup it makes; a listener per
// call would pass Node's default of 10 listeners per event with the eleventh concurrent miss, and
// Node would print a "possible EventTarget memory leak" warning about the user's signal.

interface AbortListeners {
  readonly listeners: Set<() => void>;
  readonly dispatch: () => void;
}

const bySignal = new WeakMap<AbortSignal, AbortListeners>();

/**
 * Calls `listener` once when `signal` aborts (never for a signal aborted already: check `aborted`
 * first); returns the function that stops it, which may be called any number of times. A listener
 * that throws does not keep the others from running; its error is thrown again from a microtask,
 * as an event listener's would be reported.
 */
export function onAbort(signal: AbortSignal, listener: () => void): () => void {
  let record = bySignal.get(signal);
  if (record === undefined) {
    const listeners = new Set<() => void>();
    const dispatch = (): void => {
      if (bySignal.get(signal)?.dispatch === dispatch) bySignal.delete(signal);
      const called = [...listeners];
      listeners.clear();
      for (const each of called) {
        try {
          each();
        } catch (error) {
          queueMicrotask(() => {
            throw error;
          });
        }
      }
    };
    record = { listeners, dispatch };
    bySignal.set(signal, record);
    signal.addEventListener('abort', dispatch, { once: true });
  }
  const { listeners, dispatch } = record;
  // One entry per call, even when one function is registered twice.
  const registration = (): void => listener();
  listeners.add(registration);
  return () => {
    if (!listeners.delete(registration) || listeners.size !== 0) return;
    if (bySignal.get(signal)?.dispatch !== dispatch) return;
    bySignal.delete(signal);
    signal.removeEventListener('abort', dispatch);
  };
}

/**
 * What a caller whose `signal` aborted is rejected with: the signal's `reason`, or, for a signal
 * that has none (an `AbortController` polyfill from before `reason` existed), an `AbortError`
 * `DOMException`, as `signal.throwIfAborted()` would throw: never `undefined`.
 */
export function abortReason(signal: AbortSignal): unknown {
  const reason: unknown = signal.reason;
  return reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
}
