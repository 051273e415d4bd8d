import type { BackendOperation } from '@stampede/core/adapter';
import {
  createOperationRunner,
  createRedisProtocolContext,
  type RedisProtocolContext,
} from '@stampede/redis-protocol';
import { isCluster, protocolClient, type RedisClient } from './client.js';
import { RedisCacheError } from './errors.js';

/** What the parts of one Redis cache share. */
export interface RedisContext {
  readonly client: RedisClient;
  /** Where locks live and fill ends are published: `lockClient` when given, else `client`. */
  readonly lockClient: RedisClient;
  readonly name: string;
  readonly prefix: string;
  readonly operationTimeout: number;
  /** The same cache as `@stampede/redis-protocol` sees it (the client adapted, the script runner). */
  readonly protocol: RedisProtocolContext;
  /** Runs one Redis command, bounded by `operationTimeout`; `onLate` sees a result that came too late. */
  call<T>(
    what: string,
    key: string | undefined,
    command: () => Promise<T>,
    onLate?: (value: T) => void,
  ): Promise<T>;
  /** Counts and emits a fault the core cannot see (decode, encode, publish, subscribe). */
  report(operation: BackendOperation, key: string | undefined, error: unknown): void;
}

/** The context of a cache named `name` on `client`, with its locks on `lockClient` (default `client`). */
export function createContext(
  client: RedisClient,
  name: string,
  prefix: string,
  operationTimeout: number,
  lockClient: RedisClient = client,
): RedisContext {
  const operations = createOperationRunner({
    name,
    label: 'redis',
    operationTimeout,
    createError: (code, message, options) => new RedisCacheError(code, message, options),
    mapError: redact,
    // A Cluster client follows MOVED itself; a plain client answered MOVED is misconnected.
    cluster: isCluster(client) || isCluster(lockClient),
  });
  return {
    client,
    lockClient,
    name,
    prefix,
    operationTimeout,
    protocol: createRedisProtocolContext(
      protocolClient(client),
      prefix,
      operations,
      lockClient === client ? undefined : protocolClient(lockClient),
    ),
    call: (what, key, command, onLate) => operations.call(what, key, command, onLate),
    report: (operation, key, error) => operations.report(operation, key, error),
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
