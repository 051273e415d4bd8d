import type { FillAnnouncement, FillOutcome } from '@stampede/core/adapter';
import { callSafely } from '@stampede/redis-protocol';

/**
 * What `@upstash/redis` (>= 1.35) returns from `subscribe`: one server-sent-event stream per
 * channel, on `POST /subscribe/<channel>`. Declared here rather than taken from the client's types so
 * that the package still type-checks and runs against a client without it.
 */
export interface UpstashSubscription {
  on(type: 'subscribe', listener: (count: number) => void): void;
  on(type: 'message', listener: (event: { channel: string; message: unknown }) => void): void;
  on(type: 'error', listener: (error: unknown) => void): void;
  unsubscribe(channels?: string[]): Promise<void>;
}

/** `client.subscribe` as push wake-up and the bus call it. */
export type Subscribe = (channels: string | string[]) => UpstashSubscription;

/**
 * The text of a message a stream subscribed to `channel` received, as it was published; `undefined`
 * for one that is not on `channel`. The client splits a stream's `message,<channel>,<text>` at its
 * first two commas, so a channel with commas in its name (a key's, a prefix's) leaves the rest of
 * the name at the head of the message. With `automaticDeserialization` the client hands over
 * `JSON.parse` of the text when that succeeds; a parsed value is turned back into its text.
 */
export function publishedText(
  channel: string,
  event: { channel: string; message: unknown },
): string | undefined {
  const text = typeof event.message === 'string' ? event.message : JSON.stringify(event.message);
  if (event.channel === channel) return text;
  const whole = `${event.channel},${text}`;
  return whole.startsWith(`${channel},`) ? whole.slice(channel.length + 1) : undefined;
}

/**
 * Whether `channel` survives the client's stream: it splits the stream into lines at each LF and
 * keeps only what follows `data: ` on a line, so a channel with a line break in its name would
 * reach it cut, and nothing on it would be heard.
 */
export function onOneLine(text: string): boolean {
  return !/[\r\n]/.test(text);
}

/**
 * Reads a message of the `:done` channel (`decodeAnnouncement` of the protocol cache). The release
 * script publishes the bare words `filled` / `failed`, a commit `filled|<token>|<stored text>`; a
 * client with `automaticDeserialization` tries `JSON.parse` on them and keeps the text when that
 * fails (none of them is JSON), so both settings hand over the same string.
 */
export type AnnouncementDecoder = (
  message: unknown,
) => { readonly outcome: FillOutcome; readonly announced?: FillAnnouncement | undefined } | undefined;

/**
 * Subscribes `client` to `channel` for one waiting call: `ready` once the server acknowledges the
 * subscription, `listener` with each announced outcome (and the value a commit's announcement
 * carries, decoded by `decode`). Returns the function that ends the
 * subscription (it aborts the stream, so the server drops its Redis subscriber).
 *
 * One stream per call, never shared: on Cloudflare Workers a stream belongs to the request that
 * opened it, and the core already coalesces a process's callers into one lock waiter per key. A
 * client without `subscribe`, or a subscription that fails, leaves the waiter on its poll schedule.
 */
export function listenForFillDone(
  client: object,
  channel: string,
  listener: (outcome: FillOutcome, announced?: FillAnnouncement) => void,
  ready: (() => void) | undefined,
  decode: AnnouncementDecoder,
): () => void {
  const subscribe = (client as { subscribe?: unknown }).subscribe;
  // A key with a line break in it: its channel could not be heard, and the waiter polls.
  if (typeof subscribe !== 'function' || !onOneLine(channel)) return () => {};
  let subscription: UpstashSubscription;
  try {
    // The client puts the channel into the URL path as it is: encoded here, a key with `/`, `?`,
    // `#` or `%` (and the prefix's own escapes, `%7B`) reaches the server as the exact channel.
    subscription = (subscribe as Subscribe).call(client, encodeURIComponent(channel));
  } catch {
    return () => {};
  }
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    try {
      subscription.unsubscribe().catch(() => {});
    } catch {
      // Already closed: nothing to release.
    }
  };
  subscription.on('subscribe', () => {
    if (!stopped && ready !== undefined) callSafely(ready);
  });
  subscription.on('message', (event) => {
    if (stopped) return;
    const text = publishedText(channel, event);
    if (text === undefined) return;
    const heard = decode(text);
    if (heard !== undefined) callSafely(() => listener(heard.outcome, heard.announced));
  });
  // The request failed (HTTP error, network): nothing will arrive; the waiter polls on.
  subscription.on('error', stop);
  return stop;
}
