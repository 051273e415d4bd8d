import { getOrComputeWith, inFlightCount, resetStats, statsByCache } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// The subscribe race: a lock loser subscribes to the holder's announcement after losing SET NX. A
// fill that ends before SUBSCRIBE is acknowledged is announced to no one; the loser must read once
// the subscription is confirmed instead of sleeping a whole lockPollInterval.

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
  it('a loser whose subscription is acknowledged after a 1 ms fill ended answers well under lockPollInterval', async () => {
    const options = { ttl: '1m', distributedFillLock: true, lockPollInterval: 500 } as const;
    const waits: number[] = [];
    // Fresh caches each round: the loser subscribes to the key's channel only after it loses the
    // lock, and the holder's 1 ms fill, its write and its announcement may end before Redis
    // acknowledges that SUBSCRIBE.
    for (let round = 0; round < 3; round++) {
      resetStats();
      const holder = await newCache(`race-holder-${round}`);
      const loser = await newCache(`race-loser-${round}`);
      const key = `race-${round}`;
      let loserCall: Promise<string> | undefined;
      let loserStarted = 0;
      let loserWait = -1;
      const loserFill = vi.fn(() => 'loser');
      const held = await getOrComputeWith(holder, key, options, async () => {
        // The holder has the lock: the loser's read misses and its SET NX loses.
        loserStarted = performance.now();
        loserCall = getOrComputeWith(loser, key, options, loserFill).then((value) => {
          loserWait = performance.now() - loserStarted;
          return value;
        });
        await new Promise((resolve) => setTimeout(resolve, 1));
        return 'held';
      });
      expect(held).toBe('held');
      expect(await loserCall).toBe('held');
      expect(loserFill).not.toHaveBeenCalled();
      // The holder writes and releases in one script: its fill may be over before the loser's lock
      // attempt, which then takes the free lock and finds the value with it (the double-check).
      const loserStats = statsByCache()[`race-loser-${round}`];
      expect(loserStats).toMatchObject({ lockWaitHits: 1 });
      expect((loserStats?.lockContended ?? 0) + (loserStats?.lockAcquired ?? 0)).toBe(1);
      waits.push(loserWait);
      await vi.waitFor(() => expect(inFlightCount(holder)).toBe(0));
    }
    expect(Math.max(...waits), `loser waits ${waits.map((ms) => ms.toFixed(1)).join(', ')} ms`).toBeLessThan(
      200,
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
