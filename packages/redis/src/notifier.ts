import type { FillOutcome } from '@stampede/core/adapter';
import { callSafely } from '@stampede/redis-protocol';
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
  listen(key: string, listener: (outcome: FillOutcome) => void, ready?: () => void): () => void;
  /** Opens the subscriber connection now (unless closed), so the first wait does not pay for it. */
  warm(): void;
  /** Closes the subscriber connection, if one was opened. */
  close(): Promise<void>;
}

/** The waiters of one channel, and whether Redis has acknowledged its SUBSCRIBE yet. */
interface Listeners {
  readonly listeners: Set<(outcome: FillOutcome) => void>;
  subscribed: boolean;
  /** `ready` callbacks of waiters that arrived before the acknowledgement. */
  readonly pending: (() => void)[];
}

function isOutcome(message: string): message is FillOutcome {
  return message === 'filled' || message === 'failed';
}

/**
 * A notifier on `context.lockClient` (the client itself unless the cache was given a separate lock
 * client: fill ends are published where the locks live). The subscriber is `lockClient.duplicate()`,
 * created by `warm` when the cache is created (or on the first `listen`), and owned by this cache,
 * unlike the client.
 * It follows the client's end: once the user's client has ended (`quit()`, `disconnect()`, or a
 * retry strategy that gave up; a `Cluster` ends the same way), the subscriber is disconnected too,
 * so a process whose owner closed its clients can exit without also calling `cache.close()`.
 */
export function createNotifier(context: RedisContext): Notifier {
  const channels = new Map<string, Listeners>();
  let subscriber: RedisClient | undefined;
  let closed = false;

  // Forgets the subscriber and its channels: waiters still listening fall back to polling, and a
  // later `listen` (on a client connected again) opens a new subscriber and subscribes afresh.
  const drop = (): RedisClient | undefined => {
    const client = subscriber;
    subscriber = undefined;
    channels.clear();
    context.lockClient.off('end', onClientEnd);
    return client;
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
      const listeners = channels.get(channel)?.listeners;
      if (listeners === undefined || !isOutcome(message)) return;
      for (const listener of [...listeners]) {
        try {
          listener(message);
        } catch {
          // One waiter's listener must not keep the others asleep.
        }
      }
    });
    // Connection faults surface as failed or timed-out subscribes; ioredis reconnects and
    // re-subscribes on its own, and waiters poll meanwhile.
    created.on('error', () => {});
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
      if (entry === undefined) {
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
        channels.delete(channel);
        current.pending.length = 0;
        if (closed || subscriber === undefined) return;
        const client = subscriber;
        context
          .call('unsubscribe', key, () => client.unsubscribe(channel))
          .catch((error: unknown) => {
            context.report('subscribe', key, error);
          });
      };
    },
    warm() {
      if (!closed) connect();
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
