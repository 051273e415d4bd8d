import { type CacheBus, type CacheBusHandlers, runsIsolatedRequests } from '@stampede/core/adapter';
import { callSafely, type OperationRunner } from '@stampede/redis-protocol';
import {
  type UpstashSubscription as BusSubscription,
  publishedText,
  type Subscribe,
} from './push-wake-up.js';

type Publish = (channel: string, message: string) => Promise<unknown>;

/** First and longest wait before a failed stream is opened again, in ms. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5_000;

/**
 * The invalidation bus on `channel` through `client`: PUBLISH over REST, and one server-sent-event
 * stream (`client.subscribe`) per subscriber, opened again after an error with a back-off (100 ms
 * doubling to 5 s). `undefined` for a client without `publish`.
 *
 * On Cloudflare Workers a stream belongs to the request that opened it, so `subscribe` listens to
 * nothing there (it never calls `subscribed`): a tiered cache on a worker still publishes its
 * evictions, and its own local copies are bounded by `localTtl` only. `@upstash/redis` reports a
 * subscription whose request fails (then the bus opens it again), not a stream that breaks or ends
 * after it opened (it only logs that): such a loss goes unnoticed, and `localTtl` bounds what is
 * missed.
 */
export function createUpstashBus(
  client: object,
  channel: string,
  operations: OperationRunner,
): CacheBus | undefined {
  const publish = (client as { publish?: unknown }).publish;
  const subscribe = (client as { subscribe?: unknown }).subscribe;
  if (typeof publish !== 'function') return undefined;
  return {
    async publish(message) {
      const receivers = await operations.keepAlive(
        operations.call('publish', undefined, () => (publish as Publish).call(client, channel, message)),
      );
      return typeof receivers === 'number' ? receivers : undefined;
    },
    subscribe(handlers) {
      // Where a stream must not outlive the request that opened it (workerd), nothing listens.
      if (typeof subscribe !== 'function' || runsIsolatedRequests()) return () => {};
      return listen(client, subscribe as Subscribe, channel, handlers);
    },
  };
}

function listen(
  client: object,
  subscribe: Subscribe,
  channel: string,
  handlers: CacheBusHandlers,
): () => void {
  let stopped = false;
  let current: BusSubscription | undefined;
  let acknowledged = false;
  let retryIn = RETRY_FIRST_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const close = (subscription: BusSubscription): void => {
    try {
      subscription.unsubscribe().catch(() => {});
    } catch {
      // Already closed.
    }
  };
  const retry = (): void => {
    if (stopped) return;
    timer = setTimeout(open, retryIn);
    (timer as { unref?: () => void }).unref?.();
    retryIn = Math.min(retryIn * 2, RETRY_MAX_MS);
  };
  const open = (): void => {
    timer = undefined;
    if (stopped) return;
    let subscription: BusSubscription;
    try {
      // Encoded as push-wake-up.ts does: the client puts the channel into the URL path as it is.
      subscription = subscribe.call(client, encodeURIComponent(channel));
    } catch {
      retry();
      return;
    }
    current = subscription;
    subscription.on('subscribe', () => {
      if (stopped || current !== subscription) return;
      acknowledged = true;
      retryIn = RETRY_FIRST_MS;
      if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
    });
    subscription.on('message', (event) => {
      if (stopped || current !== subscription) return;
      const text = publishedText(channel, event);
      if (text !== undefined) callSafely(() => handlers.message(text));
    });
    subscription.on('error', () => {
      if (stopped || current !== subscription) return;
      current = undefined;
      close(subscription);
      if (acknowledged) {
        acknowledged = false;
        if (handlers.lost) callSafely(() => handlers.lost?.());
      }
      retry();
    });
  };

  open();
  return () => {
    if (stopped) return;
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    if (current !== undefined) close(current);
    current = undefined;
  };
}
