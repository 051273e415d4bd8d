import { shared } from './shared.js';

/** Process-wide settings. */
export interface StampedeConfig {
  /**
   * How many stale-while-revalidate refreshes may run at once in this process, across all keys and
   * caches. A stale read that finds the cap reached serves the stale value and retries the refresh on
   * its next stale read.
   * @default 64
   */
  maxBackgroundRefreshes?: number;
  /**
   * On Node, fills run in an `AsyncLocalStorage` context so that a fill calling `getOrCompute` on
   * its own key (directly or through fills it starts) gets a `TypeError` at once instead of waiting
   * for itself forever. While any fill runs, Node 20's promise hooks then make every promise in the
   * process slower (a burst of 1,000 stale reads during a refresh: p99 about 8 ms with it, 1.2 ms
   * without). `false` turns the detection off: a self-call then waits until its `fillTimeout`.
   * Runtimes without `AsyncLocalStorage` never detect it.
   * @default true
   */
  detectSelfCalls?: boolean;
}

// The cap and the count are shared by every copy of the core loaded in this process (see
// shared.ts): one cap per process, however the core was loaded.
const refresh = shared.refresh;

/**
 * Changes process-wide settings.
 *
 * @throws RangeError when `maxBackgroundRefreshes` is not a non-negative integer
 * @example
 * configure({ maxBackgroundRefreshes: 16 })
 */
export function configure(config: StampedeConfig): void {
  if (typeof config !== 'object' || config === null) throw new TypeError('config must be an object');
  const max = config.maxBackgroundRefreshes;
  if (max !== undefined) {
    if (!Number.isInteger(max) || max < 0) {
      throw new RangeError(
        `config.maxBackgroundRefreshes must be a non-negative integer; got ${String(max)}`,
      );
    }
    refresh.max = max;
  }
  const detect = config.detectSelfCalls;
  if (detect !== undefined) {
    if (typeof detect !== 'boolean') {
      throw new TypeError(`config.detectSelfCalls must be a boolean; got ${typeof detect}`);
    }
    shared.detectSelfCalls = detect;
  }
}

/** The settings in force. */
export function getConfig(): Required<StampedeConfig> {
  return { maxBackgroundRefreshes: refresh.max, detectSelfCalls: shared.detectSelfCalls !== false };
}

/** Takes a background-refresh slot; false when the cap is reached. */
export function takeRefreshSlot(): boolean {
  if (refresh.active >= refresh.max) return false;
  refresh.active++;
  return true;
}

/** Gives a slot back when a refresh settles. */
export function releaseRefreshSlot(): void {
  refresh.active--;
}

/** How many background refreshes are running now. */
export function activeBackgroundRefreshes(): number {
  return refresh.active;
}
