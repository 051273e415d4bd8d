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
 * What a ping publishes on the bus's channel. It has no `|` in it, so a tiered cache of any version
 * (over this package, `@stampede/redis` or `@stampede/node-redis`) ignores it on its first check
 * of a message; the Upstash bus drops it before its handlers see it.
 */
export const BUS_PING = 'ping';

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
    timer = setTimeout(callback, ms);
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
