import { checkKnownKeys, type Duration, kindOf, toPositiveMilliseconds } from '@stampede/core/adapter';

/**
 * How often the invalidation bus checks that its stream still delivers. `@upstash/redis` reports a
 * subscription whose request fails, but a stream that breaks after its response began (the REST
 * service restarted, a network blip) is only logged (`Stream reading error: ...`), and one the
 * server ends is not reported at all: from then on nothing arrives on it, and nothing says so.
 */
export interface LivenessOptions {
  /**
   * Time between two checks of an acknowledged stream, in ms; each is stretched by up to a quarter
   * at random, so that replicas started together do not ping together. A check that finds that
   * something arrived since the previous one sends nothing.
   */
  readonly interval: number;
  /** How long after PUBLISH answered a ping the stream has to deliver something, in ms. */
  readonly timeout: number;
}

/**
 * The bus's checks: every 5 to 6.25 s, and 5 s for a ping to come back. An idle replica publishes
 * one ping every second check at most (its own ping counts as something that arrived); a replica
 * that hears bus traffic, another replica's pings included, publishes none. A broken stream is
 * noticed within about 19 s (two checks, PUBLISH's own time-out, the wait for the ping).
 */
export const BUS_LIVENESS: LivenessOptions = { interval: 5_000, timeout: 5_000 };

/**
 * The `busLiveness` option of `createUpstashCache` given as an object: the check of the invalidation
 * bus's stream, tuned. An idle subscriber publishes at most one ping per two intervals (up to
 * 86,400,000 / (2 × interval) PUBLISH commands a day), and a stream that broke silently is noticed
 * within about 2.5 × interval + `operationTimeout` + timeout.
 */
export interface BusLivenessOptions {
  /**
   * Time between two checks of the stream (stretched at random by up to a quarter, so that replicas
   * started together do not ping together); a check that finds the stream quiet since the previous
   * one publishes a ping. Longer: fewer PUBLISH commands, a broken stream noticed later.
   * @default 5000 (ms)
   */
  interval?: Duration | undefined;
  /**
   * How long after PUBLISH answered a ping the stream has to deliver something before it is taken
   * for lost and opened again. Shorter: a broken stream noticed sooner, but a slow delivery taken
   * for a break (the tiered cache then clears its local copies).
   * @default 5000 (ms)
   */
  timeout?: Duration | undefined;
}

const BUS_LIVENESS_NAMES: ReadonlySet<string> = new Set(['interval', 'timeout']);

/**
 * `options.busLiveness` checked, with the defaults applied: `false` for no checks.
 *
 * @throws TypeError for a value that is neither a boolean nor an object, an unknown field or a field
 * of the wrong type; RangeError for a duration below 1 ms or one that does not parse
 */
export function parseBusLiveness(option: unknown, name = 'options.busLiveness'): LivenessOptions | false {
  if (option === undefined || option === true) return BUS_LIVENESS;
  if (option === false) return false;
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw new TypeError(`${name} must be a boolean or { interval?, timeout? }; got ${kindOf(option)}`);
  }
  checkKnownKeys(option, BUS_LIVENESS_NAMES, name);
  const { interval, timeout } = option as BusLivenessOptions;
  return {
    interval:
      interval === undefined ? BUS_LIVENESS.interval : toPositiveMilliseconds(interval, `${name}.interval`),
    timeout:
      timeout === undefined ? BUS_LIVENESS.timeout : toPositiveMilliseconds(timeout, `${name}.timeout`),
  };
}

/**
 * What a ping publishes on the bus's channel. It has no `|` in it, so a tiered cache of any version
 * (over this package, `@stampede/redis` or `@stampede/node-redis`) ignores it on its first check
 * of a message; the Upstash bus drops it before its handlers see it.
 */
export const BUS_PING = 'ping';

/** The longest delay `setTimeout` honours (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const TIMER_MAX_MS = 2_147_483_647;

/** The check of one acknowledged stream. */
export interface LivenessWatch {
  /** Something arrived on the stream: it is alive. */
  heard(): void;
  /** Ends the checks (the stream was closed or found lost). */
  stop(): void;
}

/**
 * Checks one acknowledged stream every `options.interval`: after an interval in which nothing
 * arrived on it, publishes a ping through `ping` (which must reach the stream's channel) and calls
 * `lost` once when nothing arrives within `options.timeout` of PUBLISH's answer. A PUBLISH that fails
 * (the service unreachable or refusing it) tells nothing about the stream: the next check pings
 * again. Its timers never keep a process alive.
 */
export function watchLiveness(
  ping: () => Promise<unknown>,
  lost: () => void,
  options: LivenessOptions,
): LivenessWatch {
  // Something arrived since the last check.
  let heard = false;
  // A ping is out and nothing has arrived since it was sent.
  let probing = false;
  let stopped = false;
  // The next check, or the end of a ping's wait: never both.
  let timer: ReturnType<typeof setTimeout> | undefined;

  const schedule = (callback: () => void, ms: number): void => {
    // A delay past the timers' range would overflow and fire at once: wait it out in segments.
    const step = Math.min(ms, TIMER_MAX_MS);
    timer = setTimeout(step < ms ? () => schedule(callback, ms - step) : callback, step);
    (timer as { unref?: () => void }).unref?.();
  };
  const next = (): void => schedule(check, options.interval * (1 + Math.random() / 4));
  const expire = (): void => {
    timer = undefined;
    if (stopped) return;
    stopped = true;
    probing = false;
    lost();
  };
  const check = (): void => {
    timer = undefined;
    if (stopped) return;
    if (heard) {
      heard = false;
      next();
      return;
    }
    probing = true;
    ping().then(
      () => {
        if (!stopped && probing) schedule(expire, options.timeout);
      },
      () => {
        if (stopped || !probing) return;
        probing = false;
        next();
      },
    );
  };

  next();
  return {
    heard() {
      heard = true;
      if (!probing) return;
      probing = false;
      if (timer !== undefined) clearTimeout(timer);
      next();
    },
    stop() {
      stopped = true;
      probing = false;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
