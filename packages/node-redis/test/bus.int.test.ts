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
