import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import {
  createTieredCache,
  getValue,
  invalidate,
  invalidateTag,
  setValue,
  statsByCache,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { createRedisCache } from '@stampede/redis';
import { testRedis, waitFor } from '@stampede/test-support';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness, upstashClient } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-bus');
});
afterAll(async () => {
  await h?.stop();
});

/** A TCP proxy in front of the REST server that can answer 503 instead (the service is down). */
async function startProxy(
  target: URL,
): Promise<{ url: string; refuse: boolean; refused: number; accepted: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const proxy = { url: '', refuse: false, refused: 0, accepted: 0, close: async () => {} };
  const server: Server = createServer((downstream) => {
    if (proxy.refuse) {
      proxy.refused++;
      downstream.on('error', () => {});
      downstream.once('data', () =>
        downstream.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'),
      );
      return;
    }
    proxy.accepted++;
    const upstream = netConnect(Number(target.port), target.hostname);
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no proxy port');
  const url = new URL(target.href);
  url.port = String(address.port);
  proxy.url = url.href.replace(/\/$/, '');
  proxy.close = () => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return proxy;
}

describe('the Upstash invalidation bus', () => {
  // @upstash/redis reports a subscription whose request fails, not a stream that breaks after it
  // opened (it only logs that): the bus retries the former; its pings find the latter
  // (bus-restart.int.test.ts, bus-liveness.test.ts).
  it('opens a stream whose request failed again, with back-off, until it is acknowledged', async () => {
    const proxy = await startProxy(new URL(h.server.url));
    proxy.refuse = true;
    const prefix = h.nextPrefix();
    const listening = createUpstashCache({ client: upstashClient(proxy.url, h.server.token), prefix });
    const publisher = createUpstashCache({ client: h.client(), prefix });
    const heard: string[] = [];
    const events: string[] = [];
    const stop = listening.bus?.subscribe({
      message: (text) => heard.push(text),
      subscribed: () => events.push('subscribed'),
      lost: () => events.push('lost'),
    });
    try {
      // Tried again (100, 200 ms... apart), acknowledged by no one.
      await waitFor(() => proxy.refused >= 2, { message: 'the refused stream to be tried again' });
      expect(events).toEqual([]);
      proxy.refuse = false;
      await waitFor(() => events.length === 1, { timeout: 10_000 });
      expect(events).toEqual(['subscribed']);
      expect(proxy.accepted).toBe(1);
      await publisher.bus?.publish('after');
      await waitFor(() => heard.includes('after'), { timeout: 5_000 });
    } finally {
      stop?.();
      await proxy.close();
    }
  });

  it('hands a JSON-looking message back as the text published, automaticDeserialization on or off', async () => {
    const prefix = h.nextPrefix();
    const a = createUpstashCache({ client: h.client(), prefix });
    const b = createUpstashCache({ client: h.client({ automaticDeserialization: false }), prefix });
    const heard: [string, string][] = [];
    const acks: string[] = [];
    const stops = [
      a.bus?.subscribe({ message: (text) => heard.push(['a', text]), subscribed: () => acks.push('a') }),
      b.bus?.subscribe({ message: (text) => heard.push(['b', text]), subscribed: () => acks.push('b') }),
    ];
    try {
      await waitFor(() => acks.length === 2, { timeout: 5_000 });
      await a.bus?.publish('origin|k|{"json":1}');
      await waitFor(() => heard.length === 2, { timeout: 5_000 });
      expect(heard.map(([, text]) => text)).toEqual(['origin|k|{"json":1}', 'origin|k|{"json":1}']);
    } finally {
      for (const stop of stops) stop?.();
    }
  });

  // The client splits a stream's `message,<channel>,<text>` at its first two commas.
  it('hears each message as published on a prefix with commas in it', async () => {
    const prefix = `${h.nextPrefix()}a,b,`;
    const a = createUpstashCache({ client: h.client(), prefix });
    const b = createUpstashCache({ client: h.client({ automaticDeserialization: false }), prefix });
    const heard: string[] = [];
    let acks = 0;
    const stops = [a, b].map((cache) =>
      cache.bus?.subscribe({ message: (text) => heard.push(text), subscribed: () => acks++ }),
    );
    try {
      await waitFor(() => acks === 2, { timeout: 5_000 });
      await a.bus?.publish('origin|k|x,y');
      await waitFor(() => heard.length === 2, { timeout: 5_000 });
      expect(heard).toEqual(['origin|k|x,y', 'origin|k|x,y']);
    } finally {
      for (const stop of stops) stop?.();
    }
  });

  it('an ioredis replica invalidating a key or a tag with line breaks in it evicts it from an Upstash replica L1', async () => {
    const prefix = h.nextPrefix();
    const client = new IORedis((await testRedis()).url);
    const io = createTieredCache({
      local: createMemoryCache({ name: 'bus-lines-io-l1' }),
      remote: createRedisCache({ client, prefix, name: 'bus-lines-io-remote' }),
      name: 'bus-lines-io',
    });
    const up = createTieredCache({
      local: createMemoryCache({ name: 'bus-lines-up-l1' }),
      remote: createUpstashCache({ client: h.client(), prefix, name: 'bus-lines-up-remote' }),
      name: 'bus-lines-up',
    });
    try {
      // Both listen once each hears the other.
      const evictions = (name: string) => statsByCache()[name]?.busEvictions ?? 0;
      await waitFor(
        async () => {
          await setValue(io, 'probe', 'io', { ttl: 60_000 });
          await setValue(up, 'probe', 'up', { ttl: 60_000 });
          return evictions('bus-lines-io') > 0 && evictions('bus-lines-up') > 0;
        },
        { timeout: 10_000, message: 'both replicas to hear each other on the bus' },
      );
      const options = { ttl: 60_000, tags: ['t\r\n1'] };
      for (const key of ['x\ny', 'x\r\ny,z']) {
        await setValue(io, key, 'v1', options);
        expect(await getValue(up, key)).toBe('v1'); // now in the Upstash replica's L1
        await invalidate(io, key);
        expect(await getValue(up, key)).toBeUndefined();
      }
      await setValue(io, 'tagged', 'v1', options);
      expect(await getValue(up, 'tagged')).toBe('v1');
      await invalidateTag(io, 't\r\n1');
      expect(await getValue(up, 'tagged')).toBeUndefined();
    } finally {
      await io.close();
      await up.close();
      client.disconnect();
    }
  });
});
