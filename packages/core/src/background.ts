import { clockThreadEnabled, setClockThread } from './clock.js';
import { checkKnownKeys, kindOf } from './errors.js';
import { isolatedRequests, shared } from './shared.js';

/** Process-wide settings. */
export interface StampedeConfig {
  /**
   * How many background refreshes (stale-while-revalidate, early refresh, and fills that go on past
   * `softTimeout`) may run at once in this process, across all keys and caches. A stale read that finds the cap reached serves the stale value and retries the refresh on
   * its next stale read.
   * @default 64
   */
  maxBackgroundRefreshes?: number | undefined;
  /**
   * On Node, fills run in an `AsyncLocalStorage` context so that a fill calling `getOrCompute` on
   * its own key (directly or through fills it starts) gets a `TypeError` at once instead of waiting
   * for itself forever. While any fill runs, Node 20's promise hooks then make every promise in the
   * process slower (a burst of 1,000 stale reads during a refresh: p99 about 8 ms with it, 1.2 ms
   * without). `false` turns the detection off: a self-call then waits until its `fillTimeout`.
   * Runtimes without `AsyncLocalStorage` never detect it.
   * @default true
   */
  detectSelfCalls?: boolean | undefined;
  /**
   * Whether requests served concurrently by this process live in separate request contexts that must
   * not settle each other's promises, as on Cloudflare Workers (workerd cancels a request that awaits
   * another request's work as hung). When true, a caller that joins a fill in flight does not await
   * the fill's promise: it watches the flight from its own context, on its own timers (checking after
   * 1 ms, then every 2, 4, 8 and at most 10 ms), and concurrent callers do not share a backend read.
   * There is still one fill per key. The cost: a joiner hears of the fill up to 10 ms later.
   * @default true on Cloudflare Workers (`navigator.userAgent === 'Cloudflare-Workers'`), false elsewhere
   */
  isolatedRequests?: boolean | undefined;
  /**
   * The uniform random source in [0, 1) that `earlyRefresh` draws from on each fresh hit. Replace it
   * to make early refreshes reproducible (a seeded generator in tests); the values must be uniform
   * for the refresh rate to follow the XFetch formula. A source that throws costs the hit nothing:
   * that draw starts no refresh, and a `warning` says so (once per cache).
   * @default Math.random
   */
  random?: (() => number) | undefined;
  /**
   * On Node (and other runtimes with `worker_threads`), while hits come faster than 250,000 a second
   * for about 65 ms, a small thread keeps a coarse clock (whole seconds, written every 50 ms) that
   * the hit path reads instead of the real clock for entries more than 2 s from expiry; hits nearer
   * expiry read the real clock, so nothing is served as fresh past its time. A clock read costs
   * 20-50 ns, a third of a hit. The thread costs about 10 MB and 0.1% of a core while it runs, less than the
   * reads it saves at that rate; it sleeps when hits drop below about 50,000 a second and ends
   * after 30 s asleep. It never keeps the process alive, and it is not used while `Date.now` is
   * replaced (fake timers). `false` stops it and keeps it from starting: every hit then reads the
   * real clock.
   * @default true
   */
  clockThread?: boolean | undefined;
}

// The cap and the count are shared by every copy of the core loaded in this process (see
// shared.ts): one cap per process, however the core was loaded.
const refresh = shared.refresh;

const CONFIG_NAMES: ReadonlySet<string> = new Set([
  'maxBackgroundRefreshes',
  'detectSelfCalls',
  'isolatedRequests',
  'random',
  'clockThread',
]);

/**
 * Changes process-wide settings.
 *
 * @throws RangeError when `maxBackgroundRefreshes` is not a non-negative integer; TypeError when
 * `detectSelfCalls`, `isolatedRequests` or `clockThread` is not a boolean, or `random` not a function
 * @example
 * configure({ maxBackgroundRefreshes: 16 })
 */
export function configure(config: StampedeConfig): void {
  if (typeof config !== 'object' || config === null) throw new TypeError('config must be an object');
  checkKnownKeys(config, CONFIG_NAMES, 'config');
  const {
    maxBackgroundRefreshes: max,
    detectSelfCalls: detect,
    isolatedRequests: isolated,
    random,
    clockThread,
  } = config;
  // Every setting is checked before any is applied: a bad one changes nothing.
  if (max !== undefined && typeof max !== 'number') {
    throw new TypeError(`config.maxBackgroundRefreshes must be a number; got ${kindOf(max)}`);
  }
  if (max !== undefined && (!Number.isInteger(max) || max < 0)) {
    throw new RangeError(`config.maxBackgroundRefreshes must be a non-negative integer; got ${String(max)}`);
  }
  if (detect !== undefined && typeof detect !== 'boolean') {
    throw new TypeError(`config.detectSelfCalls must be a boolean; got ${kindOf(detect)}`);
  }
  if (isolated !== undefined && typeof isolated !== 'boolean') {
    throw new TypeError(`config.isolatedRequests must be a boolean; got ${kindOf(isolated)}`);
  }
  if (random !== undefined && typeof random !== 'function') {
    throw new TypeError(`config.random must be a function; got ${kindOf(random)}`);
  }
  if (clockThread !== undefined && typeof clockThread !== 'boolean') {
    throw new TypeError(`config.clockThread must be a boolean; got ${kindOf(clockThread)}`);
  }
  if (max !== undefined) refresh.max = max;
  if (clockThread !== undefined) setClockThread(clockThread);
  if (random !== undefined) shared.random = random;
  if (detect !== undefined) shared.detectSelfCalls = detect;
  if (isolated !== undefined) shared.isolatedRequests = isolated;
}

/** The settings in force. */
export function getConfig(): Required<StampedeConfig> {
  return {
    maxBackgroundRefreshes: refresh.max,
    detectSelfCalls: shared.detectSelfCalls !== false,
    isolatedRequests: isolatedRequests(),
    random: shared.random ?? Math.random,
    clockThread: clockThreadEnabled(),
  };
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
