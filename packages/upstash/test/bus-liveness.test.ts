import { createOperationRunner } from '@stampede/redis-protocol';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createUpstashBus } from '../src/bus.js';
import { UpstashCacheError } from '../src/errors.js';
import { createUpstashCache, type UpstashCacheOptions } from '../src/index.js';
import { BUS_LIVENESS, BUS_PING } from '../src/stream-liveness.js';

const CHANNEL = 'p:bus';
const { interval, timeout } = BUS_LIVENESS;

/** A stream of `@upstash/redis`'s `subscribe`, driven by the test. */
class FakeStream {
  readonly listeners = new Map<string, ((data: never) => void)[]>();
  /** Delivers what is published (false: broken after it opened, as the client never tells). */
  delivering = true;
  closed = false;
  on(type: string, listener: (data: never) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  emit(type: string, data: unknown): void {
    for (const listener of this.listeners.get(type) ?? []) listener(data as never);
  }
  async unsubscribe(): Promise<void> {
    this.closed = true;
  }
}

/** A client whose PUBLISH reaches every open, delivering stream at once. */
function fakeClient() {
  const streams: FakeStream[] = [];
  const published: string[] = [];
  const client = {
    refusePublish: false,
    streams,
    published,
    subscribe(_channel: string) {
      const stream = new FakeStream();
      streams.push(stream);
      return stream;
    },
    async publish(channel: string, message: string) {
      if (client.refusePublish) throw new TypeError('fetch failed');
      published.push(message);
      const open = streams.filter((stream) => stream.delivering && !stream.closed);
      for (const stream of open) stream.emit('message', { channel, message });
      return open.length;
    },
    // Enough of a client for `createUpstashCache`: the cache's own first request (the clock) fails,
    // which it survives, and no test here reads or writes values.
    get: () => Promise.reject(new TypeError('fetch failed')),
    set: () => Promise.reject(new TypeError('fetch failed')),
    eval: () => Promise.reject(new TypeError('fetch failed')),
    evalsha: () => Promise.reject(new TypeError('fetch failed')),
  };
  return client;
}

function createBus(client: object) {
  const operations = createOperationRunner({
    name: 'liveness-test',
    label: 'upstash',
    operationTimeout: 1_000,
    createError: (...args: ConstructorParameters<typeof UpstashCacheError>) => new UpstashCacheError(...args),
  });
  const bus = createUpstashBus(client, CHANNEL, operations);
  if (bus === undefined) throw new Error('no bus');
  return bus;
}

/** The bus (on `CHANNEL`) of a cache made with `busLiveness` as given (left out when `undefined`). */
function cacheBus(client: object, busLiveness?: UpstashCacheOptions['busLiveness']) {
  const options = { client, prefix: 'p:', ...(busLiveness === undefined ? {} : { busLiveness }) };
  const bus = createUpstashCache(options as unknown as UpstashCacheOptions).bus;
  if (bus === undefined) throw new Error('no bus');
  return bus;
}

function listen(client: ReturnType<typeof fakeClient>, bus = createBus(client)) {
  const events: string[] = [];
  const messages: string[] = [];
  const stop = bus.subscribe({
    message: (text) => messages.push(text),
    subscribed: () => events.push('subscribed'),
    lost: () => events.push('lost'),
  });
  return { events, messages, stop };
}

const pings = (client: ReturnType<typeof fakeClient>) =>
  client.published.filter((message) => message === BUS_PING).length;

/** Fake timers, and checks exactly `interval` apart (the random stretch is none), for one describe. */
function exactIntervalsOnFakeTimers(): void {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.spyOn(Math, 'random').mockReturnValue(0);
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });
}

describe('the Upstash bus notices a stream that stopped delivering', () => {
  exactIntervalsOnFakeTimers();

  it('pings after a quiet interval only, and never while the bus carries messages', async () => {
    const client = fakeClient();
    const { events, stop } = listen(client);
    client.streams[0]?.emit('subscribe', 1);
    expect(events).toEqual(['subscribed']);
    // Traffic on the bus (another replica's eviction) every 2 s: nothing to prove, no ping.
    for (let elapsed = 0; elapsed < 60_000; elapsed += 2_000) {
      await client.publish(CHANNEL, 'other|k|key');
      await vi.advanceTimersByTimeAsync(2_000);
    }
    expect(pings(client)).toBe(0);
    // Quiet: one ping on the check that finds nothing arrived, none on the check after it (the
    // ping itself arrived), and one per two checks from then on.
    await vi.advanceTimersByTimeAsync(2 * interval);
    expect(pings(client)).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(pings(client)).toBe(1 + 60_000 / (2 * interval));
    expect(events).toEqual(['subscribed']);
    expect(client.streams).toHaveLength(1);
    stop();
  });

  it('a ping not heard within the timeout: the stream is lost, closed and opened again', async () => {
    const client = fakeClient();
    const { events, messages, stop } = listen(client);
    const first = client.streams[0] as FakeStream;
    first.emit('subscribe', 1);
    first.delivering = false; // broken after the acknowledgement: the client reports nothing
    await vi.advanceTimersByTimeAsync(interval);
    expect(pings(client)).toBe(1);
    await vi.advanceTimersByTimeAsync(timeout - 1);
    expect(events).toEqual(['subscribed']);
    await vi.advanceTimersByTimeAsync(1);
    expect(events).toEqual(['subscribed', 'lost']);
    expect(first.closed).toBe(true);
    // Opened again after the first back-off step (100 ms).
    expect(client.streams).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(client.streams).toHaveLength(2);
    const second = client.streams[1] as FakeStream;
    second.emit('subscribe', 1);
    expect(events).toEqual(['subscribed', 'lost', 'subscribed']);
    await client.publish(CHANNEL, 'other|k|after');
    expect(messages).toEqual(['other|k|after']);
    stop();
    expect(second.closed).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a message that arrives while a ping is out proves the stream alive', async () => {
    const client = fakeClient();
    const { events, stop } = listen(client);
    const stream = client.streams[0] as FakeStream;
    stream.emit('subscribe', 1);
    stream.delivering = false;
    await vi.advanceTimersByTimeAsync(interval);
    expect(pings(client)).toBe(1);
    // Late, but before the timeout: some message reaches the stream.
    stream.emit('message', { channel: CHANNEL, message: BUS_PING });
    await vi.advanceTimersByTimeAsync(timeout * 2);
    expect(events).toEqual(['subscribed']);
    stop();
  });

  it('pings reach no handler, the subscriber’s own or another replica’s', async () => {
    const client = fakeClient();
    const a = listen(client);
    const b = listen(client);
    for (const stream of client.streams) stream.emit('subscribe', 1);
    await vi.advanceTimersByTimeAsync(4 * interval);
    expect(pings(client)).toBeGreaterThan(0);
    await client.publish(CHANNEL, 'origin|k|key');
    expect(a.messages).toEqual(['origin|k|key']);
    expect(b.messages).toEqual(['origin|k|key']);
    a.stop();
    b.stop();
  });

  it('a PUBLISH that fails tells nothing about the stream: it is kept, and the next check pings again', async () => {
    const client = fakeClient();
    const { events, stop } = listen(client);
    client.streams[0]?.emit('subscribe', 1);
    client.refusePublish = true;
    await vi.advanceTimersByTimeAsync(10 * interval);
    expect(events).toEqual(['subscribed']);
    client.refusePublish = false;
    await vi.advanceTimersByTimeAsync(interval);
    expect(pings(client)).toBe(1);
    expect(events).toEqual(['subscribed']);
    expect(client.streams).toHaveLength(1);
    stop();
  });

  it('checks nothing before the acknowledgement, and nothing after stop', async () => {
    const client = fakeClient();
    const { stop } = listen(client);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(client.published).toEqual([]);
    client.streams[0]?.emit('subscribe', 1);
    stop();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(client.published).toEqual([]);
  });
});

describe('busLiveness tunes or turns off the check', () => {
  exactIntervalsOnFakeTimers();

  it('left out or true: a ping after 5 s, a silent stream reopened 5 s after it', async () => {
    for (const busLiveness of [undefined, true, {}] as const) {
      const client = fakeClient();
      const { events, stop } = listen(client, cacheBus(client, busLiveness));
      const stream = client.streams[0] as FakeStream;
      stream.emit('subscribe', 1);
      stream.delivering = false;
      await vi.advanceTimersByTimeAsync(interval - 1);
      expect(pings(client)).toBe(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(pings(client)).toBe(1);
      await vi.advanceTimersByTimeAsync(timeout - 1);
      expect(events).toEqual(['subscribed']);
      await vi.advanceTimersByTimeAsync(1);
      expect(events).toEqual(['subscribed', 'lost']);
      stop();
    }
  });

  it('a custom interval and timeout change when the ping goes out and when a silent stream is reopened', async () => {
    const client = fakeClient();
    const { events, stop } = listen(client, cacheBus(client, { interval: '30s', timeout: 1_500 }));
    const first = client.streams[0] as FakeStream;
    first.emit('subscribe', 1);
    // Idle but delivering: one ping per two checks, the checks 30 s apart.
    await vi.advanceTimersByTimeAsync(30_000 - 1);
    expect(pings(client)).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(pings(client)).toBe(1);
    await vi.advanceTimersByTimeAsync(4 * 30_000);
    expect(pings(client)).toBe(3);
    expect(events).toEqual(['subscribed']);
    // Broken silently: the next ping goes out two checks after the last one was heard, and the
    // stream is taken for lost 1.5 s after PUBLISH answered it.
    first.delivering = false;
    await vi.advanceTimersByTimeAsync(2 * 30_000 - 1);
    expect(pings(client)).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(pings(client)).toBe(4);
    await vi.advanceTimersByTimeAsync(1_500 - 1);
    expect(events).toEqual(['subscribed']);
    await vi.advanceTimersByTimeAsync(1);
    expect(events).toEqual(['subscribed', 'lost']);
    expect(first.closed).toBe(true);
    await vi.advanceTimersByTimeAsync(100);
    expect(client.streams).toHaveLength(2);
    stop();
  });

  it('an interval beyond the timers’ range (24.8 days) is waited out, not fired at once', async () => {
    const client = fakeClient();
    const { stop } = listen(client, cacheBus(client, { interval: '30d' }));
    client.streams[0]?.emit('subscribe', 1);
    await vi.advanceTimersByTimeAsync(30 * 86_400_000 - 1);
    expect(pings(client)).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(pings(client)).toBe(1);
    stop();
  });

  it('false: no ping, ever, and a stream that stopped delivering is kept (nothing can tell)', async () => {
    const client = fakeClient();
    const { events, messages, stop } = listen(client, cacheBus(client, false));
    const stream = client.streams[0] as FakeStream;
    stream.emit('subscribe', 1);
    await vi.advanceTimersByTimeAsync(86_400_000);
    stream.delivering = false;
    await vi.advanceTimersByTimeAsync(86_400_000);
    expect(pings(client)).toBe(0);
    expect(events).toEqual(['subscribed']);
    expect(client.streams).toHaveLength(1);
    // Messages still arrive on a delivering stream, and stopping leaves no timer behind.
    stream.delivering = true;
    await client.publish(CHANNEL, 'other|k|key');
    expect(messages).toEqual(['other|k|key']);
    stop();
    expect(stream.closed).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
