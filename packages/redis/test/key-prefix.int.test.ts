import { getOrComputeWith, invalidate, invalidateTag } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix, written } from './helpers.js';

// A client made with ioredis's `keyPrefix` (often shared with the rest of an application): ioredis
// puts it in front of every key it sends, but not of channels, nor of the keys a script builds from
// its arguments. Before, push wake-up never woke anyone (the announcement went to a prefixed
// channel) and a tag invalidation was never seen (written under the prefix, read without it).
const KEY_PREFIX = `kp-${process.pid}:`;
const prefix = randomPrefix('key-prefix');
let url: string;
let raw: Redis;
const clients: Redis[] = [];
const caches: RedisCache[] = [];

beforeAll(async () => {
  url = (await testRedis()).url;
  raw = new Redis(url);
});

afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  await deletePrefix(raw, `${KEY_PREFIX}${prefix}`);
  raw.disconnect();
});

function cacheWith(keyPrefix: string | undefined, cachePrefix: string, name: string): RedisCache {
  const client = new Redis(url, keyPrefix === undefined ? {} : { keyPrefix });
  clients.push(client);
  const cache = createRedisCache({ client, prefix: cachePrefix, name });
  caches.push(cache);
  return cache;
}

/** 10 callers on each cache at once for `key`; how many fills ran and the slowest caller's time. */
async function herd(replicas: RedisCache[], key: string, options: object) {
  let fills = 0;
  const started = performance.now();
  const values = await Promise.all(
    replicas.flatMap((cache) =>
      Array.from({ length: 10 }, () =>
        getOrComputeWith(cache, key, options, async () => {
          fills++;
          await new Promise((resolve) => setTimeout(resolve, 100));
          return `filled by ${cache.name}`;
        }),
      ),
    ),
  );
  return { fills, values, slowestMs: performance.now() - started };
}

describe('an ioredis client with keyPrefix', () => {
  // Polling alone would take 5 s: a herd well under that was woken by the holder's announcement.
  const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 5_000, tags: ['kp-tag'] };

  it('push wake-up, tags and deletes work across replicas; keys are keyPrefix + prefix', async () => {
    const [a, b] = [cacheWith(KEY_PREFIX, prefix, 'kp-a'), cacheWith(KEY_PREFIX, prefix, 'kp-b')];
    const first = await herd([a, b], 'k', options);
    expect(first.fills).toBe(1);
    expect(first.slowestMs).toBeLessThan(2_000);
    expect(a.prefix).toBe(prefix);
    expect(await raw.exists(`${KEY_PREFIX}${prefix}{k}`)).toBe(1);
    expect(await raw.exists(`${prefix}{k}`)).toBe(0);
    await written(a, b);
    await invalidateTag(a, 'kp-tag');
    expect(await getOrComputeWith(b, 'k', options, () => 'after the tag')).toBe('after the tag');
    await written(a, b);
    await invalidate(b, 'k');
    expect(await getOrComputeWith(a, 'k', options, () => 'after the delete')).toBe('after the delete');
  });

  it('shares keys, locks and announcements with a client without keyPrefix whose prefix includes it', async () => {
    const prefixed = cacheWith(KEY_PREFIX, prefix, 'kp-mixed-a');
    const plain = cacheWith(undefined, `${KEY_PREFIX}${prefix}`, 'kp-mixed-b');
    const mixed = await herd([prefixed, plain], 'mixed', options);
    expect(mixed.fills).toBe(1);
    expect(mixed.slowestMs).toBeLessThan(2_000);
    expect(new Set(mixed.values).size).toBe(1);
    await written(prefixed, plain);
    await invalidateTag(plain, 'kp-tag');
    expect(await getOrComputeWith(prefixed, 'mixed', options, () => 'after the tag')).toBe('after the tag');
  });

  it('refuses a lockClient whose keyPrefix differs (its locks and channels would not meet the values)', () => {
    const client = new Redis(url, { keyPrefix: KEY_PREFIX, lazyConnect: true });
    const lockClient = new Redis(url, { keyPrefix: 'other:', lazyConnect: true });
    clients.push(client, lockClient);
    expect(() => createRedisCache({ client, lockClient, prefix })).toThrow(
      new RangeError(
        `options.lockClient must have the keyPrefix of options.client ('${KEY_PREFIX}'); got 'other:'`,
      ),
    );
  });
});
