import type { FillOutcome } from '@stampede/core';
import type { RedisContext } from './context.js';
import { redisKeys } from './keys.js';
import type { RedisClient } from './scripts.js';

/** Push wake-up: one subscriber connection per cache, shared by every waiting key. */
export interface Notifier {
  /** Calls `listener` when a fill of `key` ends on any replica; returns the function that stops it. */
  listen(key: string, listener: (outcome: FillOutcome) => void): () => void;
  /** Closes the subscriber connection, if one was opened. */
  close(): Promise<void>;
}

type Listeners = Set<(outcome: FillOutcome) => void>;

function isOutcome(message: string): message is FillOutcome {
  return message === 'filled' || message === 'failed';
}

/**
 * A notifier on `context.client`. The subscriber is `client.duplicate()`, created on the first
 * `listen` (a process that never waits never opens it) and owned by this cache, unlike the client.
 */
export function createNotifier(context: RedisContext): Notifier {
  const channels = new Map<string, Listeners>();
  let subscriber: RedisClient | undefined;
  let closed = false;

  const connect = (): RedisClient => {
    if (subscriber !== undefined) return subscriber;
    const created = context.client.duplicate();
    created.on('message', (channel: string, message: string) => {
      const listeners = channels.get(channel);
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
    subscriber = created;
    return created;
  };

  return {
    listen(key, listener) {
      if (closed) return () => {};
      const { channel } = redisKeys(context.prefix, key);
      let listeners = channels.get(channel);
      if (listeners === undefined) {
        listeners = new Set();
        channels.set(channel, listeners);
        const client = connect();
        context
          .call('subscribe', key, () => client.subscribe(channel))
          .catch((error: unknown) => {
            context.report('subscribe', key, error);
          });
      }
      const current = listeners;
      current.add(listener);
      return () => {
        if (!current.delete(listener) || current.size !== 0) return;
        if (channels.get(channel) !== current) return;
        channels.delete(channel);
        if (closed || subscriber === undefined) return;
        const client = subscriber;
        context
          .call('unsubscribe', key, () => client.unsubscribe(channel))
          .catch((error: unknown) => {
            context.report('subscribe', key, error);
          });
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      channels.clear();
      const client = subscriber;
      subscriber = undefined;
      if (client === undefined) return;
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
