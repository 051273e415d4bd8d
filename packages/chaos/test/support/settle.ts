/** How a promise ended, and when (ms after `settle` was called). */
export type Settled<T> =
  | { readonly ok: true; readonly value: T; readonly ms: number }
  | { readonly ok: false; readonly error: unknown; readonly ms: number };

/** Never rejects: turns `promise` into its outcome and the time it took. */
export function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  const started = performance.now();
  return promise.then(
    (value) => ({ ok: true, value, ms: performance.now() - started }),
    (error: unknown) => ({ ok: false, error, ms: performance.now() - started }),
  );
}

/** A fill that never settles on its own; it rejects once its signal aborts, as a well-behaved fill does. */
export function neverSettles(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** A fill that ignores its signal and never settles at all. */
export function hangsForever(): Promise<never> {
  return new Promise(() => {});
}
