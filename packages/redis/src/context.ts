import { reportBackendError } from '@stampede/core';
import type { RedisClient } from './scripts.js';
import { withTimeout } from './timeout.js';

/** What the parts of one Redis cache share. */
export interface RedisContext {
  readonly client: RedisClient;
  readonly name: string;
  readonly prefix: string;
  readonly operationTimeout: number;
  /** Runs one Redis command, bounded by `operationTimeout`; `onLate` sees a result that came too late. */
  call<T>(
    what: string,
    key: string | undefined,
    command: () => Promise<T>,
    onLate?: (value: T) => void,
  ): Promise<T>;
  /** Counts and emits a fault the core cannot see (decode, encode, publish, subscribe). */
  report(
    operation: 'decode' | 'encode' | 'publish' | 'subscribe',
    key: string | undefined,
    error: unknown,
  ): void;
}

/** The context of a cache named `name` on `client`. */
export function createContext(
  client: RedisClient,
  name: string,
  prefix: string,
  operationTimeout: number,
): RedisContext {
  return {
    client,
    name,
    prefix,
    operationTimeout,
    call<T>(
      what: string,
      key: string | undefined,
      command: () => Promise<T>,
      onLate?: (value: T) => void,
    ): Promise<T> {
      let pending: Promise<T>;
      try {
        pending = command();
      } catch (error) {
        pending = Promise.reject(error);
      }
      return withTimeout(pending, operationTimeout, what, key, onLate);
    },
    report(operation, key, error) {
      reportBackendError(name, operation, key, error);
    },
  };
}
