import { isPermissionError } from './access.js';

/** The pause before a failed lock release is sent again, in ms; each later pause doubles. */
export const RELEASE_RETRY_FIRST_MS = 50;

/** The longest pause between two attempts at a lock release, in ms (a lock waiter's poll ceiling). */
export const RELEASE_RETRY_CEILING_MS = 1_000;

/**
 * The longest the retries of one release go on, in ms, whatever the lock's TTL: a fault that lasts
 * longer is an outage, not a moment's fault, and a long `lockTtl` (hours) would otherwise keep a
 * timer going all that time (closing the cache ends them sooner: {@link ReleaseRetries.settle}).
 */
export const RELEASE_RETRY_LIMIT_MS = 60_000;

/** What {@link retryRelease} needs of one lock's release. */
export interface ReleaseRetry {
  /** Sends the release once (compare-and-delete by token, announcing); rejects on a fault. */
  readonly attempt: () => Promise<void>;
  /**
   * When the lock has lapsed at the latest (ms since the epoch, this process's clock): its last
   * grant or extension answered plus its TTL. A release after it frees nothing (a lock taken since
   * is another holder's, which the token check leaves alone), so the retries stop there.
   */
  readonly lapsesBy: number;
  /**
   * True when a retry is no longer useful: an earlier attempt landed after all (its answer came
   * after `operationTimeout`), or Redis was found to refuse scripts (every attempt would fail).
   */
  readonly settled: () => boolean;
}

/**
 * The retries of one cache's failed lock releases (its context's `releaseRetries`), so that closing
 * the cache can end them: without {@link ReleaseRetries.settle} they go on in the background for up
 * to {@link RELEASE_RETRY_LIMIT_MS}, also after `close()` resolved and the client was quit.
 */
export interface ReleaseRetries {
  /** Runs {@link retryRelease} for `retry`, as one of these retries. Never rejects. */
  retry(retry: ReleaseRetry): Promise<void>;
  /**
   * For a cache being closed: every retry waiting for its next attempt makes it now, and stops
   * after it whatever it gets; one with an attempt in flight stops after that attempt; a release
   * that fails from now on is tried once more at once, then left (the lock lapses after its TTL).
   * Resolves once no retry is left (each last attempt answered or timed out); never rejects. A
   * binding's `close()` calls it first, so that nothing of the cache runs after `close()` resolved.
   */
  settle(): Promise<void>;
}

/** The {@link ReleaseRetries} of one cache (see `RedisProtocolContext.releaseRetries`). */
export function createReleaseRetries(): ReleaseRetries {
  // Set once by `settle()`, never unset: the cache is being closed.
  const closing: Closing = { settling: false, pauses: new Set() };
  const running = new Set<Promise<void>>();
  return {
    retry(retry) {
      const run = retryRelease(retry, closing);
      running.add(run);
      void run.then(() => running.delete(run));
      return run;
    },
    async settle() {
      closing.settling = true;
      for (const cut of [...closing.pauses]) cut();
      // A release that fails meanwhile adds its one last attempt: waited for too.
      while (running.size !== 0) await Promise.all(running);
    },
  };
}

/** What {@link ReleaseRetries.settle} tells the retries of its cache. */
interface Closing {
  /** True once `settle()` was called: each retry makes one more attempt, at once, then stops. */
  settling: boolean;
  /** Ends the pause of each retry waiting for its next attempt (the attempt then goes out at once). */
  readonly pauses: Set<() => void>;
}

/**
 * Sends a lock release that just failed on a fault again, after {@link RELEASE_RETRY_FIRST_MS}
 * doubling up to {@link RELEASE_RETRY_CEILING_MS}, until one lands, the lock would have lapsed
 * anyway (`lapsesBy`), {@link RELEASE_RETRY_LIMIT_MS} have passed, or `settled()`. Without it a
 * release lost to a moment's fault (a dropped connection, a `BUSY` server, an HTTP 5xx) left the
 * lock held for the rest of `lockTtl`, and every replica's next call on the key waited out
 * `lockWaitTimeout` against a healthy server. Once `closing` is settling (the cache is being
 * closed, see {@link ReleaseRetries.settle}), the next attempt goes out at once and is the last.
 *
 * Never rejects: the first fault was reported by the caller, and a retry's fault says nothing new.
 * A permission refusal stops it (its warning comes from the script runner). The timers are
 * `unref`'d: a retry never keeps a process alive that has nothing else to do.
 */
async function retryRelease(retry: ReleaseRetry, closing: Closing): Promise<void> {
  const stopAt = Math.min(retry.lapsesBy, Date.now() + RELEASE_RETRY_LIMIT_MS);
  let pause = RELEASE_RETRY_FIRST_MS;
  for (;;) {
    const left = stopAt - Date.now();
    if (left <= 0) return;
    if (!closing.settling) await sleep(Math.min(pause, left), closing.pauses);
    if (retry.settled() || Date.now() >= stopAt) return;
    try {
      await retry.attempt();
      return;
    } catch (error) {
      if (isPermissionError(error)) return;
    }
    if (closing.settling) return;
    pause = Math.min(pause * 2, RELEASE_RETRY_CEILING_MS);
  }
}

/** Resolves after `ms`, or as soon as the function it adds to `cuts` is called. */
function sleep(ms: number, cuts: Set<() => void>): Promise<void> {
  return new Promise((resolve) => {
    const end = (): void => {
      clearTimeout(timer);
      cuts.delete(end);
      resolve();
    };
    const timer = setTimeout(end, ms);
    (timer as { unref?: () => void }).unref?.();
    cuts.add(end);
  });
}
