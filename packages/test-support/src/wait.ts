/** The truthy part of `T` (what {@link waitFor} returns). */
export type Truthy<T> = Exclude<T, false | 0 | 0n | '' | null | undefined>;

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /**
   * How long to keep polling before failing, in milliseconds.
   * @default 5_000
   */
  readonly timeout?: number;
  /**
   * Pause between two polls, in milliseconds.
   * @default 10
   */
  readonly interval?: number;
  /**
   * What is waited for, in words ("the registry to empty"): the error says it when the deadline passes.
   * @default 'the condition'
   */
  readonly message?: string;
}

/**
 * Polls `condition` (sync or async) until it returns a truthy value and returns that value; fails with
 * an error naming `message` once `timeout` ms have passed. A condition that throws is polled again (its
 * last error is the failure's `cause`), so "the key exists" can be written as an assertion.
 *
 * Use it instead of a sleep that "lets something happen": the test waits exactly as long as the
 * behaviour takes, and a behaviour that never happens fails at the deadline with a readable message.
 *
 * @example
 * await waitFor(() => inFlightCount(cache) === 0, { message: 'the registry to empty' });
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<Truthy<Awaited<T>>> {
  const { timeout = 5_000, interval = 10, message = 'the condition' } = options;
  const started = Date.now();
  let lastError: unknown;
  let lastValue: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as Truthy<Awaited<T>>;
      lastValue = value;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() - started >= timeout) {
      const last = lastError === undefined ? `last value: ${String(lastValue)}` : 'last poll threw';
      throw new Error(`waitFor: timed out after ${timeout} ms waiting for ${message} (${last})`, {
        cause: lastError,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** A promise with its settle functions exposed (see {@link deferred}). */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  /** Fulfils `promise` with `value`. */
  resolve(value: T): void;
  /** Rejects `promise` with `error`. */
  reject(error: unknown): void;
}

/**
 * A promise the test settles when it wants: a fill that returns `deferred.promise` stays in flight
 * until the test calls `resolve`, so ordering is decided by the test, not by a timer.
 *
 * @example
 * const gate = deferred<string>();
 * const caller = getOrCompute(cache, key, () => gate.promise);
 * // ... assert while the fill is running ...
 * gate.resolve('value');
 */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Resolves after `ms` milliseconds. Only for delays that ARE the scenario (a fill that takes 200 ms on
 * purpose, a lock TTL that must lapse); to wait for something to happen use {@link waitFor}.
 */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Makes `count` reads one after another with `read`, each of which must reject as a time-out
 * (`code` `E_STAMPEDE_BACKEND_TIMEOUT`: sent while the server is away, it waits in the client's
 * offline queue past `operationTimeout`). Answers, once all have timed out, a promise that settles
 * when every one of them has had its late answer from the client.
 *
 * @throws Error when a read answers, or rejects with another error
 */
export async function readsTimingOut(read: () => Promise<unknown>, count: number): Promise<Promise<unknown>> {
  const answered: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const pending = read();
    answered.push(pending.catch(() => undefined));
    const outcome = await pending.then(
      (value) => ({ timedOut: false, what: `an answer (${String(value)})` }),
      (error: { code?: unknown }) => ({
        timedOut: error?.code === 'E_STAMPEDE_BACKEND_TIMEOUT',
        what: String(error),
      }),
    );
    if (!outcome.timedOut) throw new Error(`read ${i + 1} of ${count} did not time out: ${outcome.what}`);
  }
  return Promise.all(answered);
}
