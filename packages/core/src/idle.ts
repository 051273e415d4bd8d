import type { Cache } from './cache.js';
import { type Duration, toMilliseconds } from './duration.js';
import { checkKnownKeys, kindOf } from './errors.js';
import { type CacheState, existingState } from './registry.js';
import { setLongTimeout } from './timers.js';

// Shutdown. A fill keeps working after its callers have their answer: it writes the value, releases
// the fleet's lock and announces the end to the replicas waiting on it; a background refresh has no
// caller at all. A process that closes its Redis client while such work runs loses the value and
// leaves the lock held, so every other replica's waiters on that key wait out `lockWaitTimeout`.
// `whenIdle` lets a shutdown wait for that work; the remote adapters' `close()` call it first.

/** How long {@link whenIdle} (and the adapters' `close()`) wait for work by default: 5 s. */
const IDLE_TIMEOUT_MS = 5_000;

const IDLE_OPTIONS: ReadonlySet<string> = new Set(['timeout']);

/** Options of {@link whenIdle}. */
export interface WhenIdleOptions {
  /**
   * How long to wait at most; the work goes on after it (a fill that never returns would otherwise
   * hold the shutdown forever).
   * @default '5s'
   */
  readonly timeout?: Duration | undefined;
}

/** Records `work` as running on the cache of `state` until it settles. */
export function trackWork(state: CacheState, work: Promise<unknown>): void {
  state.running ??= new Set();
  const running = state.running;
  running.add(work);
  const done = (): void => {
    running.delete(work);
  };
  work.then(done, done);
}

/**
 * Resolves `true` once nothing this process started on `cache` is running any more: reads in
 * flight, fills and background refreshes, with their writes, lock releases, announcements and
 * fail-safe re-arms (work started while waiting included); `false` when `timeout` passed first (the work goes on).
 * Call it on shutdown before closing the client the cache writes through, so that a value being
 * filled is stored and the fleet's lock released instead of making other replicas wait.
 * `@stampede/redis` and `@stampede/node-redis`'s `close()` and a tiered cache's `close()` call it
 * first. A cache never used has nothing running: `true` at once.
 *
 * @throws TypeError when `cache` is not an object
 * @throws TypeError / RangeError when `options.timeout` is not a duration
 * @example
 * process.on('SIGTERM', async () => {
 *   await server.close();
 *   await whenIdle(cache); // a memory or Upstash cache; the Redis caches' close() does it
 * });
 */
export async function whenIdle(cache: Cache, options?: WhenIdleOptions): Promise<boolean> {
  if (typeof cache !== 'object' || cache === null) {
    throw new TypeError(`cache must be a Cache; got ${kindOf(cache)}`);
  }
  const ms = idleTimeout(options);
  const state = existingState(cache);
  return state === undefined ? true : waitForWork(state, ms);
}

/** The wait `options` of {@link whenIdle} ask for, in milliseconds. */
export function idleTimeout(options: WhenIdleOptions | undefined): number {
  if (options === undefined) return IDLE_TIMEOUT_MS;
  // Also refuses what is not an options object, naming what it was.
  checkKnownKeys(options, IDLE_OPTIONS, 'options');
  return options.timeout === undefined ? IDLE_TIMEOUT_MS : toMilliseconds(options.timeout, 'options.timeout');
}

/** Whether the process has work running on `cache` (see {@link whenIdle}). */
export function hasWork(cache: Cache): boolean {
  const state = existingState(cache);
  return state !== undefined && busy(state);
}

// A read in flight counts: the fill it may start is work too.
function busy(state: CacheState): boolean {
  return (state.running?.size ?? 0) !== 0 || state.reads.size !== 0;
}

async function waitForWork(state: CacheState, ms: number): Promise<boolean> {
  if (!busy(state)) return true;
  let timedOut = false;
  let wake: () => void = () => {};
  const timer = setLongTimeout(() => {
    timedOut = true;
    wake();
  }, ms);
  try {
    while (busy(state) && !timedOut) {
      const deadline = new Promise<void>((resolve) => {
        wake = resolve;
      });
      const work = [...(state.running ?? []), ...state.reads.values()];
      await Promise.race([Promise.allSettled(work), deadline]);
    }
  } finally {
    timer.clear();
  }
  return !busy(state);
}
