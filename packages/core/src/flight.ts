import { CacheFillError, messageOf } from './errors.js';
import type { FillFrame } from './shared.js';

/** How a fill ended for its callers. */
export type FlightResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly kind: 'fill' | 'timeout' | 'abandoned'; readonly error: unknown };

interface Deferred {
  readonly promise: Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

function deferred(): Deferred {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<unknown>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

// Timers fire at once past this delay (a signed 32-bit millisecond count).
const MAX_TIMER_MS = 2_147_483_647;

/** Calls `callback` after `ms`, for any `ms` (longer delays are split); returns the cancel. */
function after(ms: number, callback: () => void): () => void {
  let timer: ReturnType<typeof setTimeout>;
  const arm = (left: number): void => {
    timer = setTimeout(
      left > MAX_TIMER_MS ? () => arm(left - MAX_TIMER_MS) : callback,
      Math.min(left, MAX_TIMER_MS),
    );
  };
  arm(ms);
  return () => clearTimeout(timer);
}

/**
 * One fill in flight for one (cache, key) in this process, and the callers awaiting it.
 *
 * Callers without an abort signal or a limit of their own share one promise (the leader has its
 * own, since it alone gets the fill's own error), so a herd of 10,000 allocates nothing per waiter.
 * A caller with a signal, or with a `fillTimeout` that ends before the flight's, gets its own promise
 * so that it can leave alone: when its signal aborts or its own limit passes, it stops waiting and the
 * fill goes on for the others. A caller that leaves either way no longer counts as waiting; when the
 * last caller of a foreground fill has left, nobody wants the value and the flight is abandoned.
 */
export class Flight {
  /** Aborted when every caller has left, or on `fillTimeout`. */
  readonly controller = new AbortController();
  /** Callers still waiting (a background refresh counts none but is never abandoned). */
  callers = 0;
  /** Set by invalidation: the result still reaches the callers but is not written. */
  invalidated = false;
  /** Set once; later settles are ignored. */
  result: FlightResult | undefined = undefined;
  /** The `fillTimeout` timer, if any. */
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  /**
   * When the flight's own `fillTimeout` releases every caller (ms since the epoch; infinite without
   * one). A joining caller needs a timer of its own only if its limit ends earlier.
   */
  deadline = Number.POSITIVE_INFINITY;
  /**
   * The async context of the fill function once it is called (see fill-context.ts): tells a call
   * made from inside the fill that joining this flight would wait for itself. Undefined on runtimes
   * without async context tracking.
   */
  frame: FillFrame | undefined = undefined;
  /** Called when the last caller leaves an unsettled foreground fill. */
  onAbandon: ((reason: unknown) => void) | undefined = undefined;
  /** Called once when the flight settles. */
  onSettle: (() => void) | undefined = undefined;

  private leader: Deferred | undefined = undefined;
  private shared: Deferred | undefined = undefined;
  private sharedError: CacheFillError | undefined = undefined;
  private readonly individual = new Set<(result: FlightResult) => void>();

  constructor(
    /** The key being filled. */
    readonly key: string,
    /** True for a stale-while-revalidate refresh. */
    readonly background: boolean,
    /** When the flight started (ms since the epoch): the written entry's `createdAt`. */
    readonly startedAt: number,
  ) {}

  /**
   * Waits for this fill. `leader` is the caller that started it; `signal` and `limit` (this caller's
   * own `fillTimeout`, ms) let this caller stop waiting before the fill ends.
   */
  join(leader: boolean, signal: AbortSignal | undefined, limit: number | undefined): Promise<unknown> {
    const settled = this.result;
    if (settled !== undefined) {
      return settled.ok ? Promise.resolve(settled.value) : Promise.reject(this.errorFor(settled, leader));
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    // The leader's limit is the flight's own deadline; a joiner's matters only if it ends earlier.
    const timed = limit !== undefined && Date.now() + limit < this.deadline;
    this.callers++;
    if (signal === undefined && !timed) {
      if (leader) {
        this.leader ??= deferred();
        return this.leader.promise;
      }
      this.shared ??= deferred();
      return this.shared.promise;
    }
    return new Promise((resolve, reject) => {
      let cancelTimer: (() => void) | undefined;
      const stop = (): void => {
        signal?.removeEventListener('abort', onAbort);
        cancelTimer?.();
      };
      const deliver = (result: FlightResult): void => {
        stop();
        if (result.ok) resolve(result.value);
        else reject(this.errorFor(result, leader));
      };
      const leave = (reason: unknown, error: unknown): void => {
        if (!this.individual.delete(deliver)) return;
        stop();
        reject(error);
        this.callers--;
        if (this.callers === 0 && !this.background && this.result === undefined) this.onAbandon?.(reason);
      };
      const onAbort = (): void => leave(signal?.reason, signal?.reason);
      this.individual.add(deliver);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timed) {
        cancelTimer = after(limit, () => {
          const cause = new Error(
            `fill of '${this.key}' did not settle within this caller's ${limit}ms (fillTimeout); it goes on for its other callers`,
          );
          cause.name = 'TimeoutError';
          leave(cause, new CacheFillError('timeout', this.key, cause.message, { cause }));
        });
      }
    });
  }

  /** Delivers `result` to every caller; false if the flight had already settled. */
  settle(result: FlightResult): boolean {
    if (this.result !== undefined) return false;
    this.result = result;
    this.callers = 0;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.onSettle?.();
    if (result.ok) {
      this.leader?.resolve(result.value);
      this.shared?.resolve(result.value);
    } else {
      this.leader?.reject(this.errorFor(result, true));
      this.shared?.reject(this.errorFor(result, false));
    }
    for (const deliver of this.individual) deliver(result);
    this.individual.clear();
    return true;
  }

  private errorFor(result: Exclude<FlightResult, { ok: true }>, leader: boolean): CacheFillError {
    if (result.kind === 'fill' && leader) {
      return new CacheFillError('fill', this.key, messageOf(result.error), { cause: result.error });
    }
    if (!leader && this.sharedError !== undefined) return this.sharedError;
    const error =
      result.kind === 'fill'
        ? new CacheFillError('fill_failed', this.key, messageOf(result.error))
        : result.kind === 'timeout'
          ? new CacheFillError('timeout', this.key, messageOf(result.error), { cause: result.error })
          : new CacheFillError('fill_failed', this.key, 'every caller of this fill left before it finished');
    if (!leader) this.sharedError = error;
    return error;
  }
}
