import { createRedisCache } from '@stampede/redis';
import { randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeRedisCache } from '../src/index.js';

let url: string;
let admin: Redis;

beforeAll(async () => {
  url = (await testRedis()).url;
  admin = new Redis(url);
});
afterAll(() => {
  admin.disconnect();
});

async function namedClient() {
  const name = `nrbus${Math.random().toString(36).slice(2)}`;
  const client = createClient({ url, name });
  client.on('error', () => {});
  await client.connect();
  return { client, name };
}

function listener() {
  const heard: string[] = [];
  const events: string[] = [];
  return {
    heard,
    events,
    handlers: {
      message: (text: string) => heard.push(text),
      subscribed: () => events.push('subscribed'),
      lost: () => events.push('lost'),
    },
  };
}

describe('the receiver id a Redis bus tells its subscribers', () => {
  // PUBLISH counts the subscriber connection once, whatever number of subscribers share it: a
  // tiered cache counts acknowledgements by this id (see CacheBusHandlers.subscribed).
  it('is one id per cache (its subscriber connection), the same for each subscriber, on node-redis and ioredis', async () => {
    const prefix = randomPrefix('bus-receiver');
    const { client } = await namedClient();
    const io = new Redis(url);
    const caches = [
      createNodeRedisCache({ client, prefix }),
      createNodeRedisCache({ client, prefix }),
      createRedisCache({ client: io, prefix }),
      createRedisCache({ client: io, prefix }),
    ];
    const ids: (string | undefined)[][] = caches.map(() => []);
    const stops = caches.flatMap((cache, index) =>
      [0, 1].map(() => cache.bus.subscribe({ message: () => {}, subscribed: (id) => ids[index]?.push(id) })),
    );
    try {
      await waitFor(() => ids.every((seen) => seen.length === 2), { timeout: 5_000 });
      for (const [first, second] of ids) {
        expect(typeof first).toBe('string');
        expect(first).not.toBe('');
        expect(second).toBe(first);
      }
      expect(new Set(ids.map(([first]) => first)).size).toBe(caches.length);
      // Two subscribers of one cache are one receiver of a PUBLISH.
      expect(await caches[0]?.bus.publish('origin|k|x')).toBe(caches.length);
    } finally {
      for (const stop of stops) stop();
      await Promise.all(caches.map((cache) => cache.close()));
      client.destroy();
      io.disconnect();
    }
  });
});

describe('the node-redis invalidation bus', () => {
  it('is lost when its subscriber is killed, and acknowledged again once node-redis re-subscribed', async () => {
    const { client, name } = await namedClient();
    const prefix = randomPrefix('node-redis-bus');
    const cache = createNodeRedisCache({ client, prefix });
    const on = listener();
    const stop = cache.bus.subscribe(on.handlers);
    try {
      await waitFor(() => on.events.length === 1, { timeout: 5_000 });
      // Our subscriber only: this test's connection name, with a subscription.
      const list = String(await admin.client('LIST'));
      const ids = list
        .split('\n')
        .filter((line) => line.includes(` name=${name} `) && / sub=[1-9]/.test(line))
        .map((line) => /(?:^| )id=(\d+)/.exec(line)?.[1]);
      expect(ids).toHaveLength(1);
      expect(await admin.call('CLIENT', 'KILL', 'ID', ids[0] as string)).toBe(1);
      await waitFor(() => on.events.length === 3, { timeout: 10_000 });
      expect(on.events).toEqual(['subscribed', 'lost', 'subscribed']);
      // It hears the bus again.
      await cache.bus.publish('after the reconnection');
      await waitFor(() => on.heard.includes('after the reconnection'), { timeout: 5_000 });
    } finally {
      stop();
      await cache.close();
      client.destroy();
    }
  });

  it('reaches an ioredis cache on the same prefix, and back', async () => {
    const { client } = await namedClient();
    const ioredis = new Redis(url);
    const prefix = randomPrefix('node-redis-bus-mixed');
    const nodeRedis = createNodeRedisCache({ client, prefix });
    const ioredisCache = createRedisCache({ client: ioredis, prefix });
    const [a, b] = [listener(), listener()];
    const stops = [nodeRedis.bus.subscribe(a.handlers), ioredisCache.bus.subscribe(b.handlers)];
    try {
      await waitFor(() => a.events.length === 1 && b.events.length === 1, { timeout: 5_000 });
      await nodeRedis.bus.publish('from node-redis');
      await ioredisCache.bus.publish('from ioredis');
      await waitFor(() => a.heard.length === 2 && b.heard.length === 2, { timeout: 5_000 });
      expect(a.heard).toEqual(['from node-redis', 'from ioredis']);
      expect(b.heard).toEqual(['from node-redis', 'from ioredis']);
    } finally {
      for (const stop of stops) stop();
      await Promise.all([nodeRedis.close(), ioredisCache.close()]);
      client.destroy();
      ioredis.disconnect();
    }
  });
});
