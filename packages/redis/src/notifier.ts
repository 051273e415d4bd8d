import type { CacheBusHandlers, FillAnnouncement, FillOutcome } from '@stampede/core/adapter';
import { busChannel, callSafely } from '@stampede/redis-protocol';
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

/** A waiter's listener: the outcome, and what the announcement carried (the holder's value). */
export type FillListener = (outcome: FillOutcome, announced?: FillAnnouncement) => void;

/** Reads a message of a key's channel (`decodeAnnouncement` of the protocol cache). */
export type AnnouncementDecoder = (
  message: string,
) => { readonly outcome: FillOutcome; readonly announced?: FillAnnouncement | undefined } | undefined;

/** The waiters of one channel, and whether Redis has acknowledged its SUBSCRIBE yet. */
interface Listeners {
  readonly listeners: Set<FillListener>;
  subscribed: boolean;
  /** `ready` callbacks of waiters that arrived before the acknowledgement. */
  readonly pending: (() => void)[];
}

/**
 * How many channels with no waiter left stay subscribed (the least recently waited on is
 * unsubscribed first). A key refilled while its channel lingers needs no SUBSCRIBE, and its losers
 * start listening before their lock attempt, so they need no confirming read: a hot key's herd costs
 * each loser two round trips. Each lingering channel costs Redis one subscription of this connection,
 * and this process the announcements of that key's fills.
 */
export const LINGERING_CHANNELS = 1_000;

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
  const channels = new Map<string, Listeners>();
  // Channels with no listener left, still subscribed, least recently used first.
  const lingering = new Set<string>();
  // The subscriber's connection is up and every SUBSCRIBE resent after a reconnection acknowledged.
  let up = false;
  let subscriber: RedisClient | undefined;
  let closed = false;
  const bus = busChannel(context.prefix);
  const busHandlers = new Set<CacheBusHandlers>();
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
        if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
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
    lingering.clear();
    up = false;
    context.lockClient.off('end', onClientEnd);
    busLost();
    busState = 'idle';
    return client;
  };
  const busLost = (): void => {
    if (busState !== 'acked') return;
    busState = 'idle';
    for (const handlers of [...busHandlers]) if (handlers.lost) callSafely(() => handlers.lost?.());
  };
  const onClientEnd = (): void => {
    drop()?.disconnect();
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
      const listeners = channels.get(channel)?.listeners;
      // A lingering channel's announcements go unread: nobody waits.
      if (listeners === undefined || listeners.size === 0) return;
      const heard = decode(message);
      if (heard === undefined) return;
      for (const listener of [...listeners]) {
        try {
          listener(heard.outcome, heard.announced);
        } catch {
          // One waiter's listener must not keep the others asleep.
        }
      }
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
      subscribeBusChannel(created);
      // ioredis has re-sent the SUBSCRIBEs of the channels by now: a PING's answer follows their
      // acknowledgements, and from then on the channels hear again.
      context
        .call('ping', undefined, () => created.ping())
        .then(
          () => {
            if (subscriber === created && created.status === 'ready') up = true;
          },
          () => {
            // Waiters listen after their lock attempt meanwhile, and read once on `ready`.
          },
        );
    });
    created.once('end', () => {
      // Ended on its own (its retry strategy gave up): the next `listen` opens a new one.
      if (subscriber === created) drop();
    });
    context.lockClient.on('end', onClientEnd);
    subscriber = created;
    return created;
  };

  return {
    listen(key, listener, ready) {
      if (closed) return () => {};
      const { channel } = redisKeys(context.prefix, key);
      let entry = channels.get(channel);
      if (entry !== undefined) lingering.delete(channel);
      else {
        const client = connect();
        if (client === undefined) return () => {};
        const created: Listeners = { listeners: new Set(), subscribed: false, pending: [] };
        entry = created;
        channels.set(channel, created);
        context
          .call('subscribe', key, () => client.subscribe(channel))
          .then(
            () => {
              // Dropped or unsubscribed meanwhile: nobody is listening on this entry any more.
              if (channels.get(channel) !== created) return;
              created.subscribed = true;
              for (const confirm of created.pending.splice(0)) callSafely(confirm);
            },
            (error: unknown) => {
              created.pending.length = 0;
              // Forgotten, so the next waiter subscribes again.
              if (channels.get(channel) === created && created.listeners.size === 0) {
                channels.delete(channel);
                lingering.delete(channel);
              }
              context.report('subscribe', key, error);
            },
          );
      }
      const current = entry;
      current.listeners.add(listener);
      if (ready !== undefined) {
        // Already subscribed for another waiter: this listener hears from now on, so confirm at once.
        if (current.subscribed) callSafely(ready);
        else current.pending.push(ready);
      }
      return () => {
        if (!current.listeners.delete(listener) || current.listeners.size !== 0) return;
        if (channels.get(channel) !== current) return;
        current.pending.length = 0;
        if (closed || subscriber === undefined) {
          channels.delete(channel);
          return;
        }
        // Kept subscribed for the key's next herd; the least recently used beyond the bound goes.
        lingering.add(channel);
        if (lingering.size <= LINGERING_CHANNELS) return;
        const [oldest] = lingering;
        if (oldest === undefined) return;
        lingering.delete(oldest);
        channels.delete(oldest);
        const client = subscriber;
        context
          .call('unsubscribe', key, () => client.unsubscribe(oldest))
          .catch((error: unknown) => {
            context.report('subscribe', key, error);
          });
      };
    },
    hears(key) {
      if (closed || !up) return false;
      return channels.get(redisKeys(context.prefix, key).channel)?.subscribed === true;
    },
    warm() {
      if (!closed) connect();
    },
    subscribeBus(handlers) {
      if (closed) return () => {};
      busHandlers.add(handlers);
      const client = connect();
      if (client !== undefined) {
        if (busState === 'acked') {
          if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
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
            context.report('subscribe', undefined, error);
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
