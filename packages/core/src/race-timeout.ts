import { setLongTimeout } from './timers.js';

/**
 * Races `command` against `ms` milliseconds: on time-out the promise rejects with `onTimeout()`.
 * The command itself cannot be cancelled (it may sit in a client's offline queue, or a server may
 * answer late), so `onLate` is told its value if it succeeds after all. Any `ms` is honoured, also
 * one past the 24.8-day timer limit.
 */
export function raceTimeout<T>(
  command: Promise<T>,
  ms: number,
  onTimeout: () => Error,
  onLate?: (value: T) => void,
): Promise<T> {
  // An adapter's own bug, caught here rather than as a timer that fires at once (NaN) or throws
  // from inside a timer callback, where nothing catches it (an `onTimeout` that is not a function).
  if (typeof ms !== 'number' || !(ms >= 0)) {
    return Promise.reject(
      new RangeError(`ms must be a number of milliseconds, 0 or more; got ${String(ms)}`),
    );
  }
  if (typeof onTimeout !== 'function' || (onLate !== undefined && typeof onLate !== 'function')) {
    return Promise.reject(new TypeError('onTimeout (and onLate, when given) must be functions'));
  }
  return new Promise<T>((resolve, reject) => {
    let timedOut = false;
    const timer = setLongTimeout(() => {
      timedOut = true;
      reject(onTimeout());
    }, ms);
    command.then(
      (value) => {
        if (timedOut) onLate?.(value);
        else {
          timer.clear();
          resolve(value);
        }
      },
      (error: unknown) => {
        if (timedOut) return;
        timer.clear();
        reject(error);
      },
    );
  });
}
