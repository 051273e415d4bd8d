import { isPermissionError } from './access.js';

/** The pause before a failed lock release is sent again, in ms; each later pause doubles. */
export const RELEASE_RETRY_FIRST_MS = 50;

/** The longest pause between two attempts at a lock release, in ms (a lock waiter's poll ceiling). */
export const RELEASE_RETRY_CEILING_MS = 1_000;

/**
 * The longest the retries of one release go on, in ms, whatever the lock's TTL: a fault that lasts
 * longer is an outage, not a moment's fault, and a long `lockTtl` (hours) would otherwise keep a
 * timer going all that time, also after the cache was closed and its client quit.
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
 * Sends a lock release that just failed on a fault again, after {@link RELEASE_RETRY_FIRST_MS}
 * doubling up to {@link RELEASE_RETRY_CEILING_MS}, until one lands, the lock would have lapsed
 * anyway (`lapsesBy`), {@link RELEASE_RETRY_LIMIT_MS} have passed, or `settled()`. Without it a release lost to a moment's fault (a dropped
 * connection, a `BUSY` server, an HTTP 5xx) left the lock held for the rest of `lockTtl`, and every
 * replica's next call on the key waited out `lockWaitTimeout` against a healthy server.
 *
 * Never rejects: the first fault was reported by the caller, and a retry's fault says nothing new.
 * A permission refusal stops it (its warning comes from the script runner). The timers are
 * `unref`'d: a retry never keeps a process alive that has nothing else to do.
 */
export async function retryRelease(retry: ReleaseRetry): Promise<void> {
  const stopAt = Math.min(retry.lapsesBy, Date.now() + RELEASE_RETRY_LIMIT_MS);
  let pause = RELEASE_RETRY_FIRST_MS;
  for (;;) {
    const left = stopAt - Date.now();
    if (left <= 0) return;
    await sleep(Math.min(pause, left));
    if (retry.settled() || Date.now() >= stopAt) return;
    try {
      await retry.attempt();
      return;
    } catch (error) {
      if (isPermissionError(error)) return;
    }
    pause = Math.min(pause * 2, RELEASE_RETRY_CEILING_MS);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    (timer as { unref?: () => void }).unref?.();
  });
}
