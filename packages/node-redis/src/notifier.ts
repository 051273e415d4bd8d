import type { CacheBusHandlers, FillAnnouncement, FillOutcome } from '@stampede/core/adapter';
import { busChannel, callSafely, type OperationRunner, remoteKeys } from '@stampede/redis-protocol';
import type { NodeRedisClient, NodeRedisSubscriber } from './client.js';

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
 * unsubscribed first), so that a key's next herd neither subscribes again nor needs a confirming
 * read (its losers listen before their lock attempt).
 */
export const LINGERING_CHANNELS = 1_000;

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
  const channels = new Map<string, Listeners>();
  // Channels with no listener left, still subscribed, least recently used first.
  const lingering = new Set<string>();
  // The subscriber is connected and has re-subscribed (node-redis does so before 'ready').
  let up = false;
  let subscriber: { connection: NodeRedisSubscriber; connected: Promise<unknown> } | undefined;
  let closed = false;
  const bus = busChannel(prefix);
  const busHandlers = new Set<CacheBusHandlers>();
  // 'subscribing': SUBSCRIBE sent; 'acked': the handlers hear the bus; 'lost': the connection is
  // reconnecting (node-redis re-subscribes on its own, and 'ready' follows its acknowledgement).
  let busState: 'idle' | 'subscribing' | 'acked' | 'lost' = 'idle';
  const busDispatch = (message: string): void => {
    for (const handlers of [...busHandlers]) callSafely(() => handlers.message(message));
  };
  const busAcknowledged = (): void => {
    busState = 'acked';
    for (const handlers of [...busHandlers]) {
      if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
    }
  };
  const busLost = (): void => {
    if (busState !== 'acked') return;
    busState = 'lost';
    for (const handlers of [...busHandlers]) if (handlers.lost) callSafely(() => handlers.lost?.());
  };

  // node-redis hands each subscription its own listener: one dispatcher serves every channel.
  const dispatch = (message: string, channel: string): void => {
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
  };
  // Forgets the subscriber and its channels: waiters still listening fall back to polling, and a
  // later `listen` (on a client connected again) opens a new subscriber and subscribes afresh.
  const drop = (): void => {
    const current = subscriber;
    subscriber = undefined;
    channels.clear();
    lingering.clear();
    up = false;
    busLost();
    busState = 'idle';
    client.off('end', drop);
    current?.connection.destroy();
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
    client.on('end', drop);
    subscriber = { connection, connected };
    return subscriber;
  };

  const send = (what: 'subscribe' | 'unsubscribe', key: string, command: () => Promise<unknown>): void => {
    operations.call(what, key, command).catch((error: unknown) => {
      operations.report('subscribe', key, error);
    });
  };

  return {
    listen(key, listener, ready) {
      if (closed) return () => {};
      const { channel } = remoteKeys(prefix, key);
      let entry = channels.get(channel);
      if (entry !== undefined) lingering.delete(channel);
      else {
        const current = connect();
        if (current === undefined) return () => {};
        const created: Listeners = { listeners: new Set(), subscribed: false, pending: [] };
        entry = created;
        channels.set(channel, created);
        operations
          .call('subscribe', key, async () => {
            await current.connected;
            await current.connection.subscribe(channel, dispatch);
          })
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
              operations.report('subscribe', key, error);
            },
          );
      }
      const own = entry;
      own.listeners.add(listener);
      if (ready !== undefined) {
        // Already subscribed for another waiter: this listener hears from now on.
        if (own.subscribed) callSafely(ready);
        else own.pending.push(ready);
      }
      return () => {
        if (!own.listeners.delete(listener) || own.listeners.size !== 0) return;
        if (channels.get(channel) !== own) return;
        own.pending.length = 0;
        const current = subscriber;
        if (closed || current === undefined) {
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
        send('unsubscribe', key, () => current.connection.unsubscribe(oldest));
      };
    },
    hears(key) {
      if (closed || !up) return false;
      return channels.get(remoteKeys(prefix, key).channel)?.subscribed === true;
    },
    warm() {
      if (!closed) connect();
    },
    subscribeBus(handlers) {
      if (closed) return () => {};
      busHandlers.add(handlers);
      const current = connect();
      if (busState === 'acked') {
        if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
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
            operations.report('subscribe', undefined, error);
          });
      };
    },
    close() {
      closed = true;
      drop();
    },
  };
}
