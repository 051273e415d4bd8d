/**
 * Calls a waiter's callback (a push wake-up listener, a `ready`) so that its throw cannot break the
 * subscription's dispatch nor the other waiters: the waiter still has its poll schedule.
 */
export function callSafely(callback: () => void): void {
  try {
    callback();
  } catch {
    // Ignored: the waiter falls back to polling.
  }
}
