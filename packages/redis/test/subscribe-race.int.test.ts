import { type Cache, getOrComputeWith, inFlightCount, resetStats, statsByCache } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// The subscribe race: a lock loser subscribes to the holder's announcement after losing SET NX. A
// fill that ends before SUBSCRIBE is acknowledged is announced to no one; the loser must read once
// the subscription is confirmed instead of sleeping a whole lockPollInterval. The test orders the
// steps itself (the loser loses, then the holder announces, then the loser subscribes) instead of
// racing a 1 ms fill against the loser's round trips, which a loaded machine lost 1 run in 5.

const prefix = randomPrefix('redis-subscribe-race');
const clients: Redis[] = [];
const caches: RedisCache[] = [];

async function newCache(name: string): Promise<RedisCache> {
  // One client per cache, as two replicas would have: each opens its own subscriber connection.
  const client = new Redis((await testRedis()).url);
  clients.push(client);
  const cache = createRedisCache({ client, prefix, name });
  caches.push(cache);
  // A cache is created before its first herd: its warm-up (SCRIPT LOAD, the clock, CONFIG GET) has
  // been answered once a later command on the same connection is.
  await client.ping();
  return cache;
}

afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  const first = clients[0];
  if (first !== undefined) await deletePrefix(first, prefix);
  for (const client of clients) client.disconnect();
  await (await testRedis()).stop();
});

describe('subscribe race', () => {
  it('a loser that subscribes only after the holder announced its fill answers well under lockPollInterval', async () => {
    // A poll interval far beyond the bound below: a loser that misses the announcement and does not
    // read on the acknowledgement sleeps all of it, whatever the machine's load.
    const options = {
      ttl: '1m',
      distributedFillLock: true,
      lockPollInterval: 5_000,
      lockWaitTimeout: 30_000,
    } as const;
    const waits: number[] = [];
    // The race, made to happen every time: the loser loses SET NX while the holder fills, and its
    // SUBSCRIBE is sent only once the holder's announcement has gone out (an observer heard it).
    // Left to timing, the interleaving depends on the load: on a busy machine the loser's read and
    // SET NX could come after the holder's 1 ms fill and release, and it never contended at all.
    for (let round = 0; round < 3; round++) {
      resetStats();
      const holder = await newCache(`race-holder-${round}`);
      const loserCache = await newCache(`race-loser-${round}`);
      const key = `race-${round}`;
      const observer = new Redis((await testRedis()).url);
      clients.push(observer);
      const { channel } = redisKeys(prefix, key);
      const announced = new Promise<number>((resolve) => {
        observer.on('message', (heard) => {
          if (heard === channel) resolve(performance.now());
        });
      });
      await observer.subscribe(channel);
      // The loser replica as the core sees it, except that its subscription waits for the announcement.
      const loser: Cache = {
        ...loserCache,
        onFillDone(listenKey, listener, ready) {
          let stop: (() => void) | undefined;
          let stopped = false;
          void announced.then(() => {
            if (!stopped) stop = loserCache.onFillDone(listenKey, listener, ready);
          });
          return () => {
            stopped = true;
            stop?.();
          };
        },
      };
      let loserCall: Promise<string> | undefined;
      let answeredAt = 0;
      const loserFill = vi.fn(() => 'loser');
      const held = await getOrComputeWith(holder, key, options, async () => {
        // The holder has the lock: the loser's read misses and its SET NX loses.
        loserCall = getOrComputeWith(loser, key, options, loserFill).then((value) => {
          answeredAt = performance.now();
          return value;
        });
        await vi.waitFor(() => expect(statsByCache()[`race-loser-${round}`]?.lockContended).toBe(1), {
          interval: 1,
          timeout: 10_000,
        });
        return 'held';
      });
      expect(held).toBe('held');
      expect(await loserCall).toBe('held');
      expect(loserFill).not.toHaveBeenCalled();
      expect(statsByCache()[`race-loser-${round}`]).toMatchObject({ lockContended: 1, lockWaitHits: 1 });
      // From the announcement to the loser's answer: its SUBSCRIBE, the acknowledgement, one read.
      waits.push(answeredAt - (await announced));
      await vi.waitFor(() => expect(inFlightCount(holder)).toBe(0));
      observer.disconnect();
    }
    expect(Math.max(...waits), `loser waits ${waits.map((ms) => ms.toFixed(1)).join(', ')} ms`).toBeLessThan(
      2_000,
    );
  });

  it('onFillDone calls ready once SUBSCRIBE is acknowledged, and at once for a second waiter on the channel', async () => {
    const cache = await newCache('ready');
    const publisher = clients[clients.length - 1] as Redis;
    const heard: string[] = [];
    let firstReady = false;
    const confirmed = new Promise<void>((resolve) => {
      cache.onFillDone(
        'announced',
        (outcome) => heard.push(`first ${outcome}`),
        () => {
          firstReady = true;
          resolve();
        },
      );
    });
    expect(firstReady).toBe(false);
    await confirmed;
    // Confirmed means listening: a publication sent now is heard.
    await publisher.publish(redisKeys(prefix, 'announced').channel, 'filled');
    await vi.waitFor(() => expect(heard).toEqual(['first filled']));
    let secondReady = false;
    const stop = cache.onFillDone(
      'announced',
      (outcome) => heard.push(`second ${outcome}`),
      () => {
        secondReady = true;
      },
    );
    expect(secondReady).toBe(true);
    stop();
  });
});
