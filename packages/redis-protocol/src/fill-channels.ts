import {
  checkCacheKey,
  checkFillDoneArguments,
  type FillAnnouncement,
  type FillOutcome,
} from '@stampede/core/adapter';
import { callSafely } from './call-safely.js';

/** A call that outlived `operationTimeout` (the operation runner's time-out; the command may still land). */
const isTimeout = (error: unknown): boolean =>
  (error as { code?: unknown } | null)?.code === 'E_STAMPEDE_BACKEND_TIMEOUT';

/** A waiter's listener: the outcome, and what the announcement carried (the holder's value). */
export type FillListener = (outcome: FillOutcome, announced?: FillAnnouncement) => void;

/** Reads a message of a key's channel (`decodeAnnouncement` of the protocol cache). */
export type AnnouncementDecoder = (
  message: string,
) => { readonly outcome: FillOutcome; readonly announced?: FillAnnouncement | undefined } | undefined;

/**
 * How many channels with no waiter left stay subscribed (the least recently waited on is
 * unsubscribed first). A key refilled while its channel lingers needs no SUBSCRIBE, and its losers
 * start listening before their lock attempt, so they need no confirming read: a hot key's herd costs
 * each loser two round trips. Each lingering channel costs Redis one subscription of the subscriber
 * connection, and the process the announcements of that key's fills.
 */
export const LINGERING_CHANNELS = 1_000;

/** What {@link createFillChannels} needs of a binding's subscriber connection. */
export interface FillChannelsConnection {
  /**
   * Subscribes to `channel` (for a waiter on `key`); resolves once Redis acknowledged it. `undefined`
   * when no subscriber can be opened (the client has ended): the waiter then polls. A SUBSCRIBE that
   * outlives `operationTimeout` rejects with the time-out, and `late` is called if Redis acknowledges
   * it after all (pass it as the operation runner's `onLate`): a cold subscriber connection on a busy
   * server can take that long, and the channel is subscribed from then on.
   */
  subscribe(channel: string, key: string, late: () => void): Promise<unknown> | undefined;
  /** True while a subscriber is open and the notifier not closed: only then may a channel linger. */
  open(): boolean;
  /** Unsubscribes from `channel`, a lingering channel pushed out by the bound; reports its own faults. */
  unsubscribe(channel: string, key: string): void;
  /** Reports a SUBSCRIBE that failed (the waiters poll). */
  report(key: string, error: unknown): void;
}

/** The waiters of the keys' channels on one subscriber connection (see {@link createFillChannels}). */
export interface FillChannels {
  /**
   * Adds `listener` on `channel`, subscribing first unless it already is (or lingers); `ready` is
   * called once the SUBSCRIBE is acknowledged (at once when it already was), never when it fails.
   * Returns the function that removes the listener; the channel then lingers, subscribed.
   */
  listen(channel: string, key: string, listener: FillListener, ready?: () => void): () => void;
  /** Hands a message of `channel` to its listeners; a lingering channel's messages go unread. */
  deliver(channel: string, message: string): void;
  /** True when `channel` is subscribed and acknowledged on the current connection. */
  subscribed(channel: string): boolean;
  /** Forgets every channel (the connection was dropped: a new one subscribes afresh). */
  clear(): void;
}

/** The waiters of one channel, and whether Redis has acknowledged its SUBSCRIBE yet. */
interface Listeners {
  readonly listeners: Set<FillListener>;
  subscribed: boolean;
  /** `ready` callbacks of waiters that arrived before the acknowledgement. */
  readonly pending: (() => void)[];
}

/**
 * The push wake-up channels of one subscriber connection, shared by the ioredis and node-redis
 * bindings: one SUBSCRIBE per key however many wait on it, confirmations for waiters that arrive
 * before the acknowledgement, and channels that linger after their last waiter (at most
 * {@link LINGERING_CHANNELS}, least recently used out first) so that a key's next herd hears its
 * holder without subscribing again.
 */
export function createFillChannels(
  connection: FillChannelsConnection,
  decode: AnnouncementDecoder,
): FillChannels {
  const channels = new Map<string, Listeners>();
  // Channels with no listener left, still subscribed, least recently used first.
  const lingering = new Set<string>();

  const subscribe = (channel: string, key: string): Listeners | undefined => {
    const created: Listeners = { listeners: new Set(), subscribed: false, pending: [] };
    const acknowledged = (): void => {
      // Dropped or unsubscribed meanwhile: nobody is listening on this entry any more.
      if (channels.get(channel) !== created || created.subscribed) return;
      created.subscribed = true;
      for (const confirm of created.pending.splice(0)) callSafely(confirm);
    };
    const sent = connection.subscribe(channel, key, acknowledged);
    if (sent === undefined) return undefined;
    channels.set(channel, created);
    sent.then(acknowledged, (error: unknown) => {
      connection.report(key, error);
      // Only timed out: Redis may still acknowledge it (`acknowledged` then confirms the waiters,
      // who poll meanwhile). Forgetting it would leave the channel subscribed but never confirmed
      // for this key's later herds.
      if (isTimeout(error)) return;
      created.pending.length = 0;
      // Refused: forgotten, so the next waiter subscribes again.
      if (channels.get(channel) === created && created.listeners.size === 0) {
        channels.delete(channel);
        lingering.delete(channel);
      }
    });
    return created;
  };

  return {
    listen(channel, key, listener, ready) {
      let entry = channels.get(channel);
      if (entry !== undefined) lingering.delete(channel);
      else entry = subscribe(channel, key);
      if (entry === undefined) return () => {};
      const own = entry;
      own.listeners.add(listener);
      if (ready !== undefined) {
        // Already subscribed for another waiter: this listener hears from now on, so confirm at once.
        if (own.subscribed) callSafely(ready);
        else own.pending.push(ready);
      }
      return () => {
        if (!own.listeners.delete(listener) || own.listeners.size !== 0) return;
        if (channels.get(channel) !== own) return;
        own.pending.length = 0;
        if (!connection.open()) {
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
        connection.unsubscribe(oldest, key);
      };
    },
    deliver(channel, message) {
      const listeners = channels.get(channel)?.listeners;
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
    },
    subscribed(channel) {
      return channels.get(channel)?.subscribed === true;
    },
    clear() {
      channels.clear();
      lingering.clear();
    },
  };
}

/** What a binding's notifier offers its cache's push wake-up: a listener per key, and whether it hears. */
export interface PushWakeUpNotifier {
  listen(key: string, listener: FillListener, ready?: () => void): () => void;
  hears(key: string): boolean;
}

/**
 * A binding's `onFillDone` and `hearsFillDone` over its notifier, their arguments checked (before
 * anything is subscribed); with push wake-up off (`enabled` false), nothing is subscribed and
 * nothing is heard, so waiters poll.
 */
export function pushWakeUpMembers(
  enabled: boolean,
  notifier: PushWakeUpNotifier,
): {
  onFillDone(key: string, listener: FillListener, ready?: () => void): () => void;
  hearsFillDone(key: string): boolean;
} {
  return {
    onFillDone(key, listener, ready) {
      checkFillDoneArguments(key, listener, ready);
      return enabled ? notifier.listen(key, listener, ready) : () => {};
    },
    hearsFillDone(key) {
      checkCacheKey(key);
      return enabled && notifier.hears(key);
    },
  };
}
