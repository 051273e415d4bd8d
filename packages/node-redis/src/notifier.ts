import type { CacheBusHandlers } from '@stampede/core/adapter';
import {
  type AnnouncementDecoder,
  busChannel,
  callSafely,
  createFillChannels,
  type FillListener,
  type OperationRunner,
  onClientEnd,
  randomToken,
  remoteKeys,
} from '@stampede/redis-protocol';
import type { NodeRedisClient, NodeRedisSubscriber } from './client.js';

/** Destroys a subscriber connection; one destroyed already (node-redis throws then) is left as it is. */
function destroyConnection(connection: NodeRedisSubscriber): void {
  try {
    connection.destroy();
  } catch {
    // Closed already.
  }
}

/** Push wake-up: one subscriber connection per cache, shared by every waiting key. */
export interface Notifier {
  /**
   * Calls `listener` when a fill of `key` ends on any replica (with what the announcement carried);
   * returns the function that stops it. `ready` is called once SUBSCRIBE is acknowledged (at once
   * when the channel already was); never when the subscription fails (the waiter polls).
   */
  listen(key: string, listener: FillListener, ready?: () => void): () => void;
  /**
   * True when `key`'s channel is subscribed and acknowledged on a connection that has not dropped
   * since: a channel stays subscribed after its last listener left (see {@link LINGERING_CHANNELS}).
   */
  hears(key: string): boolean;
  /** Opens the subscriber connection now (unless closed), so the first wait does not pay for it. */
  warm(): void;
  /**
   * Listens on the invalidation bus channel of the prefix, on the same subscriber connection.
   * `subscribed` is called once SUBSCRIBE is acknowledged and again each time the connection is
   * ready after a reconnection (node-redis re-subscribes before it reports ready); `lost` when it
   * starts reconnecting.
   */
  subscribeBus(handlers: CacheBusHandlers): () => void;
  /** Closes the subscriber connection, if one was opened. */
  close(): void;
}

export type { AnnouncementDecoder, FillListener } from '@stampede/redis-protocol';
export { LINGERING_CHANNELS } from '@stampede/redis-protocol';

/**
 * A notifier on `client` (the cache's lock client: fill ends are published where the locks live).
 * The subscriber is `client.duplicate()`, connected by `warm` when the cache is created (or on the
 * first `listen`) and owned by this cache, unlike the client. It
 * follows the client's end: once the user's client has closed, the subscriber is destroyed too, so
 * a process whose owner closed its clients can exit without also calling `cache.close()`.
 */
export function createNotifier(
  client: NodeRedisClient,
  prefix: string,
  operations: OperationRunner,
  decode: AnnouncementDecoder,
): Notifier {
  // The keys' channels (and their waiters) on the current subscriber; see `createFillChannels`.
  const channels = createFillChannels(
    {
      subscribe: (channel, key, late) => {
        const current = connect();
        if (current === undefined) return undefined;
        return operations.call(
          'subscribe',
          key,
          async () => {
            await current.connected;
            await current.connection.subscribe(channel, dispatch);
          },
          late,
        );
      },
      open: () => !closed && subscriber !== undefined,
      unsubscribe: (channel, key) => {
        const current = subscriber;
        if (current !== undefined) unsubscribe(key, () => current.connection.unsubscribe(channel));
      },
      report: (key, error) => operations.report('subscribe', key, error),
    },
    decode,
  );
  // The subscriber is connected and has re-subscribed (node-redis does so before 'ready').
  let up = false;
  let subscriber: { connection: NodeRedisSubscriber; connected: Promise<unknown> } | undefined;
  // Stops following the client's end (see `onClientEnd`): set while a subscriber is open.
  let stopFollowing: (() => void) | undefined;
  let closed = false;
  const bus = busChannel(prefix);
  const busHandlers = new Set<CacheBusHandlers>();
  // The bus's subscribers all hear it through the one subscriber connection, which PUBLISH counts
  // once: they are told one receiver id (see `CacheBusHandlers.subscribed`), drawn by the first.
  let receiver: string | undefined;
  // 'subscribing': SUBSCRIBE sent; 'acked': the handlers hear the bus; 'lost': the connection is
  // reconnecting (node-redis re-subscribes on its own, and 'ready' follows its acknowledgement).
  let busState: 'idle' | 'subscribing' | 'acked' | 'lost' = 'idle';
  const busDispatch = (message: string): void => {
    for (const handlers of [...busHandlers]) callSafely(() => handlers.message(message));
  };
  const busAcknowledged = (): void => {
    busState = 'acked';
    for (const handlers of [...busHandlers]) {
      if (handlers.subscribed) callSafely(() => handlers.subscribed?.(receiver));
    }
  };
  const busLost = (): void => {
    if (busState !== 'acked') return;
    busState = 'lost';
    for (const handlers of [...busHandlers]) if (handlers.lost) callSafely(() => handlers.lost?.());
  };

  // node-redis hands each subscription its own listener: one dispatcher serves every channel.
  const dispatch = (message: string, channel: string): void => channels.deliver(channel, message);
  // Forgets the subscriber and its channels: waiters still listening fall back to polling, and a
  // later `listen` (on a client connected again) opens a new subscriber and subscribes afresh.
  const drop = (): void => {
    const current = subscriber;
    subscriber = undefined;
    channels.clear();
    up = false;
    busLost();
    busState = 'idle';
    stopFollowing?.();
    stopFollowing = undefined;
    if (current === undefined) return;
    destroyConnection(current.connection);
    // node-redis (6.3) keeps the socket of a connection destroyed while it connects open, and the
    // process with it: destroyed once more when its connect settles, it closes.
    current.connected.then(
      () => destroyConnection(current.connection),
      () => {},
    );
  };

  const connect = (): NonNullable<typeof subscriber> | undefined => {
    if (subscriber !== undefined) return subscriber;
    // A subscriber opened for a closed client would be the one connection left holding the
    // process open; the waiter polls instead (and its polls fail fast on that client).
    if (!client.isOpen) return undefined;
    const connection = client.duplicate();
    // Connection faults surface as failed or timed-out subscribes; node-redis reconnects and
    // re-subscribes on its own, and waiters poll meanwhile.
    connection.on('error', () => {});
    connection.on('reconnecting', () => {
      if (subscriber?.connection !== connection) return;
      up = false;
      busLost();
    });
    connection.on('ready', () => {
      if (subscriber?.connection !== connection) return;
      up = true;
      if (busState === 'lost') busAcknowledged();
    });
    connection.on('end', () => {
      // Ended on its own (its reconnect strategy gave up): the next `listen` opens a new one.
      if (subscriber?.connection === connection) drop();
    });
    const connected = connection.connect();
    connected.catch(() => {});
    stopFollowing = onClientEnd(client, drop);
    subscriber = { connection, connected };
    return subscriber;
  };

  const unsubscribe = (key: string, command: () => Promise<unknown>): void => {
    operations.call('unsubscribe', key, command).catch((error: unknown) => {
      // Closed meanwhile (the connection destroyed under the command): nothing is left to listen.
      if (!closed) operations.reportUnsubscribe(key, error);
    });
  };

  return {
    listen(key, listener, ready) {
      if (closed) return () => {};
      return channels.listen(remoteKeys(prefix, key).channel, key, listener, ready);
    },
    hears(key) {
      if (closed || !up) return false;
      return channels.subscribed(remoteKeys(prefix, key).channel);
    },
    warm() {
      if (!closed) connect();
    },
    subscribeBus(handlers) {
      if (closed) return () => {};
      receiver ??= randomToken();
      busHandlers.add(handlers);
      const current = connect();
      if (busState === 'acked') {
        if (handlers.subscribed) callSafely(() => handlers.subscribed?.(receiver));
      } else if (busState === 'idle' && current !== undefined) {
        busState = 'subscribing';
        operations
          .call(
            'subscribe',
            undefined,
            async () => {
              await current.connected;
              await current.connection.subscribe(bus, busDispatch);
            },
            // Acknowledged after `operationTimeout`: the handlers hear the bus from then on.
            () => {
              if (subscriber === current && busState === 'idle') busAcknowledged();
            },
          )
          .then(
            () => {
              if (subscriber === current && busState === 'subscribing') busAcknowledged();
            },
            (error: unknown) => {
              if (subscriber === current && busState === 'subscribing') busState = 'idle';
              operations.report('subscribe', undefined, error);
            },
          );
      }
      return () => {
        if (!busHandlers.delete(handlers) || busHandlers.size !== 0) return;
        const active = subscriber;
        busState = 'idle';
        if (closed || active === undefined) return;
        operations
          .call('unsubscribe', undefined, () => active.connection.unsubscribe(bus))
          .catch((error: unknown) => {
            // A tiered cache's close() stops listening, then the cache's close() ends the connection
            // under the UNSUBSCRIBE it did not wait for: the documented shutdown is no fault.
            if (!closed) operations.reportUnsubscribe(undefined, error);
          });
      };
    },
    close() {
      closed = true;
      drop();
    },
  };
}
