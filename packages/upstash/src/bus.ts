import {
  type CacheBus,
  type CacheBusHandlers,
  checkBusHandlers,
  checkBusMessage,
  runsIsolatedRequests,
} from '@stampede/core/adapter';
import { callSafely, type OperationRunner } from '@stampede/redis-protocol';
import {
  type UpstashSubscription as BusSubscription,
  publishedText,
  type Subscribe,
} from './push-wake-up.js';
import {
  BUS_LIVENESS,
  BUS_PING,
  type LivenessOptions,
  type LivenessWatch,
  watchLiveness,
} from './stream-liveness.js';

type Publish = (channel: string, message: string) => Promise<unknown>;

/** First and longest wait before a failed stream is opened again, in ms. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5_000;

/**
 * The invalidation bus on `channel` through `client`: PUBLISH over REST, and one server-sent-event
 * stream (`client.subscribe`) per subscriber, opened again with a back-off (100 ms doubling to 5 s)
 * after its request fails or once it is found lost. `undefined` for a client without `publish`.
 *
 * `@upstash/redis` reports only a subscription whose request fails: a stream that breaks or ends
 * after it opened is logged at most. So an acknowledged stream is checked (`liveness`, see
 * {@link BUS_LIVENESS}): after a quiet interval the subscriber publishes a ping on `channel` and
 * expects to hear it; one not heard in time is a lost stream (`lost`, then `subscribed` once it is
 * open again, and the tiered cache clears its local copies). Pings never reach `message`. With
 * `liveness` `false` nothing is checked and nothing pinged: a stream that broke silently stays
 * broken, and a tiered cache's local copies are then bounded by its `localTtl` only.
 *
 * On Cloudflare Workers a stream belongs to the request that opened it, so `subscribe` listens to
 * nothing there (it never calls `subscribed`, and sends no ping): a tiered cache on a worker still
 * publishes its evictions, and its own local copies are bounded by `localTtl` only.
 */
export function createUpstashBus(
  client: object,
  channel: string,
  operations: OperationRunner,
  liveness: LivenessOptions | false = BUS_LIVENESS,
): CacheBus | undefined {
  const publish = (client as { publish?: unknown }).publish;
  const subscribe = (client as { subscribe?: unknown }).subscribe;
  if (typeof publish !== 'function') return undefined;
  return {
    async publish(message) {
      checkBusMessage(message);
      const receivers = await operations.keepAlive(
        operations.call('publish', undefined, () => (publish as Publish).call(client, channel, message)),
      );
      return typeof receivers === 'number' ? receivers : undefined;
    },
    subscribe(handlers) {
      checkBusHandlers(handlers);
      // Where a stream must not outlive the request that opened it (workerd), nothing listens.
      if (typeof subscribe !== 'function' || runsIsolatedRequests()) return () => {};
      // Not through `waitUntil`: nothing listens where requests are isolated, so nothing pings.
      const ping = () =>
        operations.call('publish', undefined, () => (publish as Publish).call(client, channel, BUS_PING));
      return listen(client, subscribe as Subscribe, channel, handlers, ping, liveness);
    },
  };
}

function listen(
  client: object,
  subscribe: Subscribe,
  channel: string,
  handlers: CacheBusHandlers,
  ping: () => Promise<unknown>,
  liveness: LivenessOptions | false,
): () => void {
  let stopped = false;
  // The stream being opened or open; `undefined` while waiting to open one again.
  let current: BusSubscription | undefined;
  // `current` was acknowledged: its loss is reported through `lost`.
  let acknowledged = false;
  // The checks of `current`, from its acknowledgement until it is closed or lost (none without `liveness`).
  let watch: LivenessWatch | undefined;
  let retryIn = RETRY_FIRST_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const close = (subscription: BusSubscription): void => {
    watch?.stop();
    watch = undefined;
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
  // The request failed, or the stream stopped delivering: closed (a stream that only stalled is
  // aborted), and a new one opened after the back-off.
  const drop = (subscription: BusSubscription): void => {
    if (stopped || current !== subscription) return;
    current = undefined;
    close(subscription);
    if (acknowledged) {
      acknowledged = false;
      if (handlers.lost) callSafely(() => handlers.lost?.());
    }
    retry();
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
      watch?.stop();
      watch = liveness === false ? undefined : watchLiveness(ping, () => drop(subscription), liveness);
      if (handlers.subscribed) callSafely(() => handlers.subscribed?.());
    });
    subscription.on('message', (event) => {
      if (stopped || current !== subscription) return;
      watch?.heard();
      const text = publishedText(channel, event);
      if (text !== undefined && text !== BUS_PING) callSafely(() => handlers.message(text));
    });
    subscription.on('error', () => drop(subscription));
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
