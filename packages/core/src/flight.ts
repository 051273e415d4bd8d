import { CacheFillError, messageOf } from './errors.js';

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

/**
 * One fill in flight for one (cache, key) in this process, and the callers awaiting it.
 *
 * Callers without an abort signal share one promise (the leader has its own, since it alone gets
 * the fill's own error), so a herd of 10,000 allocates nothing per waiter; callers with a signal
 * get their own promise so each can leave alone.
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

  /** Waits for this fill. `leader` is the caller that started it. */
  join(leader: boolean, signal: AbortSignal | undefined): Promise<unknown> {
    const settled = this.result;
    if (settled !== undefined) {
      return settled.ok ? Promise.resolve(settled.value) : Promise.reject(this.errorFor(settled, leader));
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.callers++;
    if (signal === undefined) {
      if (leader) {
        this.leader ??= deferred();
        return this.leader.promise;
      }
      this.shared ??= deferred();
      return this.shared.promise;
    }
    return new Promise((resolve, reject) => {
      const deliver = (result: FlightResult): void => {
        signal.removeEventListener('abort', onAbort);
        if (result.ok) resolve(result.value);
        else reject(this.errorFor(result, leader));
      };
      const onAbort = (): void => {
        if (!this.individual.delete(deliver)) return;
        reject(signal.reason);
        this.callers--;
        if (this.callers === 0 && !this.background && this.result === undefined)
          this.onAbandon?.(signal.reason);
      };
      this.individual.add(deliver);
      signal.addEventListener('abort', onAbort, { once: true });
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
