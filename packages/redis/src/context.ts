import { reportBackendError } from '@stampede/core/adapter';
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
      return withTimeout(pending.catch(rethrowRedacted), operationTimeout, what, key, onLate);
    },
    report(operation, key, error) {
      reportBackendError(name, operation, key, redact(error));
    },
  };
}

/**
 * ioredis hangs the failed command on its reply errors (`error.command = { name, args }`); after a
 * reconnect that command can be an `AUTH` carrying the password, and for any command the args are
 * user data. Neither belongs in an event, a log line or a rejection, so only the name is kept.
 */
export function redact(error: unknown): unknown {
  if (typeof error === 'object' && error !== null && 'command' in error) {
    const command = (error as { command: unknown }).command;
    const name =
      typeof command === 'object' && command !== null && 'name' in command
        ? String((command as { name: unknown }).name)
        : undefined;
    try {
      Object.defineProperty(error, 'command', {
        value: { name, args: ['[redacted]'] },
        enumerable: true,
        configurable: true,
        writable: true,
      });
    } catch {
      // A frozen error keeps its command; nothing better can be done without losing the error.
    }
  }
  return error;
}

function rethrowRedacted(error: unknown): never {
  throw redact(error);
}
