import type { CacheBusHandlers } from '@stampede/core/adapter';
import {
  type AnnouncementDecoder,
  busChannel,
  callSafely,
  createFillChannels,
  type FillListener,
  onClientEnd,
  randomToken,
} from '@stampede/redis-protocol';
import type { RedisClient } from './client.js';
import type { RedisContext } from './context.js';
import { redisKeys } from './keys.js';

/** Push wake-up: one subscriber connection per cache, shared by every waiting key. */
export interface Notifier {
  /**
   * Calls `listener` when a fill of `key` ends on any replica; returns the function that stops it.
   * `ready` is called once SUBSCRIBE is acknowledged (at once when the channel already was, for
   * another waiter); never when the subscription fails (the waiter polls).
   */
  listen(key: string, listener: FillListener, ready?: () => void): () => void;
  /**
   * True when `key`'s channel is subscribed, acknowledged, and the connection has not dropped since
   * (a listener added now hears every announcement from now on). A channel stays subscribed for a
   * while after its last listener left (see {@link LINGERING_CHANNELS}).
   */
  hears(key: string): boolean;
  /** Opens the subscriber connection now (unless closed), so the first wait does not pay for it. */
  warm(): void;
  /**
   * Listens on the invalidation bus channel of the cache's prefix, on the same subscriber
   * connection. `subscribed` is called on every acknowledgement (the first, and after each
   * reconnection once ioredis has re-subscribed), `lost` when the connection closes.
   */
  subscribeBus(handlers: CacheBusHandlers): () => void;
  /** Closes the subscriber connection, if one was opened. */
  close(): Promise<void>;
}

export type { AnnouncementDecoder, FillListener } from '@stampede/redis-protocol';
export { LINGERING_CHANNELS } from '@stampede/redis-protocol';

/**
 * True for an error Redis sent as the reply to a command (ioredis's `ReplyError`: a refusal, an
 * unknown command), as opposed to a time-out or a lost connection: the command was answered.
 */
function isServerReply(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

/** How long a lock client may stay 'disconnecting' before its subscriber takes it as ended. */
const DISCONNECTING_GRACE_MS = 1_000;

/**
 * A notifier on `context.lockClient` (the client itself unless the cache was given a separate lock
 * client: fill ends are published where the locks live). The subscriber is `lockClient.duplicate()`,
 * created by `warm` when the cache is created (or on the first `listen`), and owned by this cache,
 * unlike the client.
 * It follows the client's end: once the user's client has ended (`quit()`, `disconnect()`, or a
 * retry strategy that gave up; a `Cluster` ends the same way), the subscriber is disconnected too,
 * so a process whose owner closed its clients can exit without also calling `cache.close()`.
 */
export function createNotifier(context: RedisContext, decode: AnnouncementDecoder): Notifier {
  // The keys' channels (and their waiters) on the current subscriber; see `createFillChannels`.
  const channels = createFillChannels(
    {
      subscribe: (channel, key, late) => {
        const client = connect();
        if (client === undefined) return undefined;
        return context.call('subscribe', key, () => client.subscribe(channel), late);
      },
      open: () => !closed && subscriber !== undefined,
      unsubscribe: (channel, key) => {
        const client = subscriber;
        if (client === undefined) return;
        context
          .call('unsubscribe', key, () => client.unsubscribe(channel))
          .catch((error: unknown) => {
            context.protocol.operations.reportUnsubscribe(key, error);
          });
      },
      report: (key, error) => context.report('subscribe', key, error),
    },
    decode,
  );
  // The subscriber's connection is up and every SUBSCRIBE resent after a reconnection acknowledged.
  let up = false;
  let subscriber: RedisClient | undefined;
  // Stops following the client's end (see `onClientEnd`): set while a subscriber is open.
  let stopFollowing: (() => void) | undefined;
  let closed = false;
  const bus = busChannel(context.prefix);
  const busHandlers = new Set<CacheBusHandlers>();
  // The bus's subscribers all hear it through the one subscriber connection, which PUBLISH counts
  // once: they are told one receiver id (see `CacheBusHandlers.subscribed`), drawn by the first.
  let receiver: string | undefined;
  // 'idle': not subscribed on the current connection; 'subscribing': SUBSCRIBE sent (ioredis
  // resends it after a reconnection); 'acked': Redis confirmed it and the handlers were told.
  let busState: 'idle' | 'subscribing' | 'acked' = 'idle';

  const subscribeBusChannel = (client: RedisClient): void => {
    if (busState !== 'idle' || busHandlers.size === 0) return;
    busState = 'subscribing';
    const acknowledged = (): void => {
      if (subscriber !== client || busState === 'acked' || busHandlers.size === 0) return;
      busState = 'acked';
      for (const handlers of [...busHandlers]) {
        if (handlers.subscribed) callSafely(() => handlers.subscribed?.(receiver));
      }
    };
    // A SUBSCRIBE acknowledged after `operationTimeout` still counts (`onLate`): from then on the
    // handlers hear the bus.
    context
      .call('subscribe', undefined, () => client.subscribe(bus), acknowledged)
      .then(acknowledged, (error: unknown) => {
        if (subscriber === client && busState === 'subscribing') busState = 'idle';
        context.report('subscribe', undefined, error);
      });
  };

  const drop = (): RedisClient | undefined => {
    const client = subscriber;
    subscriber = undefined;
    channels.clear();
    up = false;
    stopFollowing?.();
    stopFollowing = undefined;
    busLost();
    busState = 'idle';
    return client;
  };
  const busLost = (): void => {
    if (busState !== 'acked') return;
    busState = 'idle';
    for (const handlers of [...busHandlers]) if (handlers.lost) callSafely(() => handlers.lost?.());
  };
  const clientEnded = (): void => {
    drop()?.disconnect();
  };
  // An ioredis Cluster quit (or disconnected) before it had connected stays 'disconnecting' and
  // never emits 'end' (it has no node to close), so a subscriber that connects meanwhile would be
  // the one socket keeping the process alive. A Cluster still 'disconnecting' a second later is
  // taken as ended; one reconnecting (`disconnect(true)`) is 'connecting' or 'ready' by then. The
  // timer holds nothing open.
  const endsWithoutEvent = (created: RedisClient): void => {
    const timer = setTimeout(() => {
      if (subscriber === created && context.lockClient.status === 'disconnecting') clientEnded();
    }, DISCONNECTING_GRACE_MS);
    (timer as { unref?: () => void }).unref?.();
  };

  const connect = (): RedisClient | undefined => {
    if (subscriber !== undefined) return subscriber;
    // A subscriber opened for a client that has already ended would be the one connection left
    // holding the process open; the waiter polls instead (and its polls fail fast on that client).
    if (context.lockClient.status === 'end') return undefined;
    const created = context.lockClient.duplicate();
    created.on('message', (channel: string, message: string) => {
      if (channel === bus) {
        for (const handlers of [...busHandlers]) callSafely(() => handlers.message(message));
        return;
      }
      channels.deliver(channel, message);
    });
    // Connection faults surface as failed or timed-out subscribes; ioredis reconnects and
    // re-subscribes on its own, and waiters poll meanwhile.
    created.on('error', () => {});
    // The bus: a closed connection may miss messages (`lost`); once it is ready again (ioredis has
    // re-sent its SUBSCRIBEs by then), one more SUBSCRIBE of the bus channel is answered after them,
    // and its acknowledgement tells the handlers they hear again.
    created.on('close', () => {
      if (subscriber !== created) return;
      up = false;
      busLost();
    });
    created.on('ready', () => {
      if (subscriber !== created) return;
      if (context.lockClient.status === 'disconnecting') endsWithoutEvent(created);
      subscribeBusChannel(created);
      // ioredis has re-sent the SUBSCRIBEs of the channels by now: a PING's answer follows their
      // acknowledgements, and from then on the channels hear again. Redis's refusal of the PING (a
      // user without +ping) is an answer too, sent in the same order: it proves as much.
      const answered = (): void => {
        if (subscriber === created && created.status === 'ready') up = true;
      };
      context
        .call('ping', undefined, () => created.ping())
        .then(answered, (error: unknown) => {
          if (isServerReply(error)) answered();
          // Otherwise waiters listen after their lock attempt meanwhile, and read once on `ready`.
        });
    });
    created.once('end', () => {
      // Ended on its own (its retry strategy gave up): the next `listen` opens a new one.
      if (subscriber === created) drop();
    });
    stopFollowing = onClientEnd(context.lockClient, clientEnded);
    subscriber = created;
    return created;
  };

  return {
    listen(key, listener, ready) {
      if (closed) return () => {};
      return channels.listen(redisKeys(context.prefix, key).channel, key, listener, ready);
    },
    hears(key) {
      if (closed || !up) return false;
      return channels.subscribed(redisKeys(context.prefix, key).channel);
    },
    warm() {
      if (!closed) connect();
    },
    subscribeBus(handlers) {
      if (closed) return () => {};
      receiver ??= randomToken();
      busHandlers.add(handlers);
      const client = connect();
      if (client !== undefined) {
        if (busState === 'acked') {
          if (handlers.subscribed) callSafely(() => handlers.subscribed?.(receiver));
        } else {
          subscribeBusChannel(client);
        }
      }
      return () => {
        if (!busHandlers.delete(handlers) || busHandlers.size !== 0) return;
        const current = subscriber;
        if (closed || current === undefined || busState === 'idle') return;
        busState = 'idle';
        context
          .call('unsubscribe', undefined, () => current.unsubscribe(bus))
          .catch((error: unknown) => {
            context.protocol.operations.reportUnsubscribe(undefined, error);
          });
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      const client = drop();
      if (client === undefined || client.status === 'end') return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1_000);
        client.once('end', () => {
          clearTimeout(timer);
          resolve();
        });
        client.disconnect();
      });
    },
  };
}
