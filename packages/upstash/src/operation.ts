import { type BackendOperation, raceTimeout, reportBackendError } from '@stampede/core/adapter';
import { UpstashCacheError } from './errors.js';

/** What every request of one cache shares: its name (for reports), its time limit, `waitUntil`. */
export interface OperationContext {
  readonly name: string;
  readonly operationTimeout: number;
  readonly waitUntil: ((promise: Promise<unknown>) => void) | undefined;
}

/** Hands `request` to the platform's `waitUntil` (when given) so it outlives the response. */
export function keepAlive<T>(context: OperationContext, request: Promise<T>): Promise<T> {
  if (context.waitUntil !== undefined) {
    try {
      context.waitUntil(request.catch(() => undefined));
    } catch {
      // Outside a request (a script, a test) there is nothing to keep alive.
    }
  }
  return request;
}

/**
 * Runs one Upstash request, racing it against `operationTimeout`: on time-out the promise rejects
 * with a `STAMPEDE_UPSTASH_TIMEOUT` {@link UpstashCacheError}. The request itself cannot be
 * cancelled (the client may be retrying, or the server hanging), so `onLate` is told its result if
 * it answers after all.
 */
export function callUpstash<T>(
  context: OperationContext,
  operation: BackendOperation | 'time',
  key: string | undefined,
  request: () => Promise<T>,
  onLate?: (value: T) => void,
): Promise<T> {
  const ms = context.operationTimeout;
  let pending: Promise<T>;
  try {
    pending = request();
  } catch (error) {
    pending = Promise.reject(error);
  }
  return raceTimeout(
    pending,
    ms,
    () =>
      new UpstashCacheError(
        'STAMPEDE_UPSTASH_TIMEOUT',
        `upstash ${operation} did not answer within ${ms}ms`,
        { key },
      ),
    onLate,
  );
}

/** Counts a fault the core cannot see (a decode failure) and emits its `backend-error` event. */
export function report(
  context: OperationContext,
  operation: BackendOperation,
  key: string,
  error: unknown,
): void {
  reportBackendError(context.name, operation, key, error);
}
