import {
  type BackendOperation,
  kindOf,
  messageOf,
  raceTimeout,
  reportBackendError,
  reportWarning,
} from '@stampede/core/adapter';
import { createChannelRefusalWatch } from './access.js';
import { type RedisProtocolErrorFactory, redactServerEcho } from './errors.js';
import { createRefusedWriteWatch } from './refused-writes.js';

/** Options of {@link createOperationRunner}. */
export interface OperationRunnerOptions {
  /** The cache's name in reports (stats, `backend-error` events). */
  readonly name: string;
  /** Names the backend in time-out messages (`'redis'`, `'upstash'`). */
  readonly label: string;
  /** Longest wait for any one call, in ms. */
  readonly operationTimeout: number;
  /** Builds the binding's error (for a time-out: code `E_STAMPEDE_BACKEND_TIMEOUT`). */
  readonly createError: RedisProtocolErrorFactory;
  /**
   * Rewrites a client's error before it is rethrown or reported (ioredis hangs the failed command,
   * arguments included, on its errors; its binding redacts them here).
   * @default undefined (errors pass unchanged)
   */
  readonly mapError?: ((error: unknown) => unknown) | undefined;
  /**
   * Hands a write, a delete or a lock release to the platform so it outlives the response
   * (Cloudflare's or Vercel's `waitUntil`).
   * @default undefined (nothing to keep alive)
   */
  readonly waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
  /**
   * The client follows Redis Cluster's redirections itself (an ioredis `Cluster`). Otherwise a
   * `MOVED` reply means it talks to one node of a Cluster as if it were the whole server: one
   * warning for the cache's life (see {@link isMovedReply}).
   * @default false
   */
  readonly cluster?: boolean | undefined;
}

/**
 * A `MOVED` redirection: the key's slot is served by another node of a Redis Cluster. A client that
 * is not a Cluster client gets it for every key whose slot lives elsewhere: those keys are never
 * cached (each call a miss and a fill) and their locks never taken.
 */
export function isMovedReply(error: unknown): boolean {
  return error instanceof Error && /^MOVED \d+ /.test(error.message);
}

/**
 * ioredis's refusal of a command on a connection that subscribed to a channel: a client the
 * application also uses for its own pub/sub can run nothing else, so a cache on it stores nothing.
 */
export function isSubscriberModeError(error: unknown): boolean {
  return error instanceof Error && /^Connection in subscriber mode\b/.test(error.message);
}

/** A client connected in a way that takes every call away, told apart by the error it gets. */
interface Misconnection {
  readonly matches: (error: unknown) => boolean;
  /** The client itself follows the redirection (an ioredis `Cluster`): no warning for it. */
  readonly clusterClientsFollow: boolean;
  readonly warning: (name: string, reply: string) => string;
}

const MISCONNECTIONS: readonly Misconnection[] = [
  {
    matches: isSubscriberModeError,
    clusterClientsFollow: false,
    warning: (name) =>
      `stampede: the client of cache '${name}' is in subscriber mode (it ran SUBSCRIBE or PSUBSCRIBE): it ` +
      'can run no other command, so nothing is read, stored or locked (a miss and a fill on every call). ' +
      'Give the cache a client of its own (client.duplicate()).',
  },
  {
    matches: isMovedReply,
    clusterClientsFollow: true,
    warning: (name, reply) =>
      `stampede: Redis answered ${reply} to cache '${name}': its client is connected to one node ` +
      'of a Redis Cluster but is not a Cluster client, so every key whose slot lives on another node is ' +
      'never cached (a miss and a fill on every call) and its fill lock never taken. Pass an ioredis ' +
      'Cluster (new Cluster([...])) to @stampede/redis.',
  },
];

/** Bounded calls and fault reports of one cache. */
export interface OperationRunner {
  /** The cache's name in reports. */
  readonly name: string;
  /** Longest wait for any one call, in ms. */
  readonly operationTimeout: number;
  /**
   * Runs one call, racing it against `operationTimeout`: on time-out the promise rejects with an
   * `E_STAMPEDE_BACKEND_TIMEOUT` error. The call itself cannot be cancelled (it may sit in a
   * client's offline queue, or a server may answer late), so `onLate` is told its value if it
   * succeeds after all. A call that throws synchronously rejects. A write of `key` (`operation`
   * `'set'` or `'commit'`) the server refuses `REFUSED_WRITE_STREAK` (3) times in a row gets one
   * warning for the cache's life (see `createRefusedWriteWatch`).
   */
  call<T>(
    operation: string,
    key: string | undefined,
    command: () => Promise<T>,
    onLate?: (value: T) => void,
  ): Promise<T>;
  /**
   * A value of `key` could not be serialised, so its write was never sent: counted toward the
   * key's streak of unstored writes (see `createRefusedWriteWatch`). The fault itself reaches the
   * core as the write's rejection.
   */
  unserialisable(key: string, error: unknown): void;
  /** Counts a fault the core cannot see (decode, encode, publish, subscribe) and emits its event. */
  report(operation: BackendOperation, key: string | undefined, error: unknown): void;
  /**
   * Counts a failed UNSUBSCRIBE (a lingering channel let go, the bus left) and emits its event, as
   * operation `'subscribe'`. Unlike a failed SUBSCRIBE, a refusal of it is no cause for a warning:
   * the channel only stays subscribed, and nothing stops hearing.
   */
  reportUnsubscribe(key: string | undefined, error: unknown): void;
  /** Hands `request` to the platform's `waitUntil` (when given) so it outlives the response. */
  keepAlive<T>(request: Promise<T>): Promise<T>;
}

/** The {@link OperationRunner} of a cache with these options. */
export function createOperationRunner(options: OperationRunnerOptions): OperationRunner {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`options must be an object; got ${kindOf(options)}`);
  }
  const { name, label, operationTimeout: ms, createError, mapError, waitUntil } = options;
  // Every call is raced against it: NaN or a negative time would time each one out at once.
  if (typeof ms !== 'number' || !(ms > 0)) {
    throw new RangeError(
      `options.operationTimeout must be a number of milliseconds above 0; got ${String(ms)}`,
    );
  }
  if (typeof createError !== 'function') {
    throw new TypeError(`options.createError must be a function; got ${kindOf(createError)}`);
  }
  let warnedWaitUntil = false;
  // A misconnected client: each kind warned of once for the cache's life.
  const misconnections = MISCONNECTIONS.filter(
    (kind) => !(kind.clusterClientsFollow && options.cluster === true),
  );
  const rethrow = (error: unknown): never => {
    if (misconnections.length !== 0) {
      const kind = misconnections.find((each) => each.matches(error));
      if (kind !== undefined) {
        misconnections.splice(misconnections.indexOf(kind), 1);
        reportWarning(name, kind.warning(name, messageOf(error)));
      }
    }
    const redacted = redactServerEcho(error);
    throw mapError === undefined ? redacted : mapError(redacted);
  };
  // Writes (on their own, or committed with a lock's release) the server keeps refusing.
  const refusedWrites = createRefusedWriteWatch(name);
  // Pub/sub the ACL refuses: SUBSCRIBE (push wake-up, the bus), PUBLISH on the bus.
  const channels = createChannelRefusalWatch(name);
  return {
    name,
    operationTimeout: ms,
    call<T>(
      operation: string,
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
      pending = pending.catch(rethrow);
      if (key !== undefined && (operation === 'set' || operation === 'commit')) {
        // Followed to the end, past a time-out too: a refusal that comes late is still one.
        pending = pending.then(
          (value) => {
            refusedWrites.written(key);
            return value;
          },
          (error: unknown) => {
            refusedWrites.refused(key, error);
            throw error;
          },
        );
      }
      // (A failed SUBSCRIBE reaches `report`, where every binding sends it.)
      if (operation === 'publish') {
        pending = pending.catch((error: unknown) => {
          channels.failed('publish', error);
          throw error;
        });
      }
      return raceTimeout(
        pending,
        ms,
        () =>
          createError('E_STAMPEDE_BACKEND_TIMEOUT', `${label} ${operation} did not answer within ${ms}ms`, {
            key,
          }),
        onLate,
      );
    },
    unserialisable(key, error) {
      refusedWrites.unserialisable(key, error);
    },
    report(operation, key, error) {
      if (operation === 'subscribe') channels.failed('subscribe', error);
      reportBackendError(name, operation, key, mapError === undefined ? error : mapError(error));
    },
    reportUnsubscribe(key, error) {
      reportBackendError(name, 'subscribe', key, mapError === undefined ? error : mapError(error));
    },
    keepAlive(request) {
      if (waitUntil !== undefined) {
        try {
          waitUntil(request.catch(() => undefined));
        } catch (error) {
          // Nothing keeps the request alive after the response: on an edge runtime it is
          // cancelled. Usually a method passed without its object (`ctx.waitUntil`: "Illegal
          // invocation"), which fails every time: said once.
          if (!warnedWaitUntil) {
            warnedWaitUntil = true;
            reportWarning(
              name,
              `stampede: options.waitUntil of cache '${name}' threw (${messageOf(error)}): its requests are not kept alive after the response. Pass the platform's waitUntil bound to its object: \`(promise) => ctx.waitUntil(promise)\`, \`ctx.waitUntil.bind(ctx)\`, or \`import { waitUntil } from 'cloudflare:workers'\`.`,
            );
          }
        }
      }
      return request;
    },
  };
}
