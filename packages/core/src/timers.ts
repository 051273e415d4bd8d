/**
 * The longest delay `setTimeout` and `setInterval` honour: 2^31 - 1 ms (about 24.8 days). Node,
 * browsers and workerd store the delay in a signed 32-bit integer; a longer one overflows and the
 * timer fires after about 1 ms instead.
 */
export const TIMER_MAX_MS = 2_147_483_647;

/** A timer started by {@link setLongTimeout}. */
export interface LongTimeout {
  /** Cancels the timer. Calling it again, or after the timer fired, does nothing. */
  clear(): void;
}

/** Options of {@link setLongTimeout}. */
export interface LongTimeoutOptions {
  /**
   * Lets the process exit while only this timer is pending (Node's `unref`; ignored where timers
   * have no such notion).
   * @default false
   */
  readonly unref?: boolean | undefined;
}

/**
 * `setTimeout` for any delay: one longer than {@link TIMER_MAX_MS} is waited out in segments of at
 * most that length, so `'30d'` means 30 days instead of overflowing into an immediate call. The
 * segments are counted, not read from a clock, so a wall-clock jump neither shortens nor stretches
 * the wait (timers only ever fire late, so the whole wait is at least `ms`). A delay beyond any
 * realistic uptime simply never fires.
 *
 * @param callback - called once, when `ms` milliseconds have passed
 * @param ms - the delay in milliseconds
 * @example
 * const timer = setLongTimeout(() => console.log('a month later'), 30 * 86_400_000);
 * timer.clear();
 */
export function setLongTimeout(callback: () => void, ms: number, options?: LongTimeoutOptions): LongTimeout {
  const unref = options?.unref === true;
  let remaining = ms;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (): void => {
    const step = Math.min(remaining, TIMER_MAX_MS);
    remaining -= step;
    timer = setTimeout(remaining > 0 ? arm : callback, step);
    if (unref) (timer as { unref?: () => void }).unref?.();
  };
  arm();
  return {
    clear() {
      clearTimeout(timer);
    },
  };
}

/**
 * A `setInterval` period for `ms`, clamped to {@link TIMER_MAX_MS}: ticking more often than asked is
 * the safe side for the periodic work stampede does (extending a lock before it lapses).
 */
export function intervalFor(ms: number): number {
  return Math.min(TIMER_MAX_MS, Math.max(1, Math.floor(ms)));
}
