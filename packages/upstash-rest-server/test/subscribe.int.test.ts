import { waitFor } from '@stampede/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('rest-sub');
});
afterAll(async () => {
  await h?.stop();
});

/** Waits (at most 5 s) for `check`; the failure names `what`. */
function until(what: string, check: () => boolean | Promise<boolean>): Promise<unknown> {
  return waitFor(check, { timeout: 5_000, interval: 20, message: what });
}

async function subscribers(channel: string): Promise<number> {
  const reply = (await h.direct.pubsub('NUMSUB', channel)) as [string, number];
  return Number(reply[1]);
}

describe.each([{ autoPipelining: true }, { autoPipelining: false }])('9. subscribe over SSE, %o', (mode) => {
  it('delivers the subscribe event first, then payloads with commas intact, and lets go on unsubscribe', async () => {
    const redis = h.client(mode);
    const channel = `${h.prefix}chan-${mode.autoPipelining}`;
    const events: string[] = [];
    const messages: unknown[] = [];
    const subscriber = redis.subscribe<unknown>([channel]);
    subscriber.on('subscribe', (count) => events.push(`subscribe ${count}`));
    subscriber.on('message', ({ message }) => messages.push(message));

    await until('the subscribe event', () => events.length > 0);
    expect(events).toEqual(['subscribe 1']);
    expect(h.server.subscriptionCount()).toBe(1);
    expect(await subscribers(channel)).toBe(1);

    await redis.publish(channel, 'a,b,c');
    await redis.publish(channel, { text: 'héllo, 🚀', list: [1, 2] });
    await until('both messages', () => messages.length === 2);
    expect(messages).toEqual(['a,b,c', { text: 'héllo, 🚀', list: [1, 2] }]);

    await subscriber.unsubscribe();
    await until('the server to drop the subscription', () => h.server.subscriptionCount() === 0);
    await until('Redis to drop the subscriber', async () => (await subscribers(channel)) === 0);
  });

  it('serves psubscribe with the pattern and channel in each message', async () => {
    const redis = h.client(mode);
    const pattern = `${h.prefix}p-${mode.autoPipelining}:*`;
    const channel = `${h.prefix}p-${mode.autoPipelining}:one`;
    const seen: { pattern: string; channel: string; message: unknown }[] = [];
    let subscribed = false;
    const subscriber = redis.psubscribe<unknown>([pattern]);
    subscriber.on('psubscribe', () => {
      subscribed = true;
    });
    subscriber.on('pmessage', (event) => seen.push(event));
    await until('the subscription', () => subscribed);
    // The client JSON-parses pattern messages without a fallback, so publish JSON (with commas).
    await redis.publish(channel, { csv: 'x,y' });
    await until('the message', () => seen.length === 1);
    expect(seen[0]).toEqual({ pattern, channel, message: { csv: 'x,y' } });
    await subscriber.unsubscribe();
    await until('the server to drop the subscription', () => h.server.subscriptionCount() === 0);
  });
});

describe('9. subscribe: the stream’s lifetime', () => {
  it('counts each stream opened, and frees one the client aborts right after opening it', async () => {
    const redis = h.client();
    const channel = `${h.prefix}early`;
    const opened = h.server.stats().subscriptions;
    const subscriber = redis.subscribe<unknown>([channel]);
    await until('the request to reach the server', () => h.server.stats().subscriptions > opened);
    await subscriber.unsubscribe();
    await until('the server to drop the subscription', () => h.server.subscriptionCount() === 0);
    await until('Redis to drop the subscriber', async () => (await subscribers(channel)) === 0);
    expect(h.server.stats().subscriptions - opened).toBe(1);
  });
});
