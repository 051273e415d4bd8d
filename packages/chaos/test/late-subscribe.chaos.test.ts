import {
  type Cache,
  getOrComputeWith,
  inFlightCount,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  statsByCache,
} from '@stampede/core';
import { createRedisCache, type RedisCache } from '@stampede/redis';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ChaosProxy, startProxy } from './support/proxy.js';
import { deletePrefix, sharedRedis, sleep } from './support/redis.js';

// A lock loser's SUBSCRIBE that Redis acknowledges only after `operationTimeout` (a cold subscriber
// connection on a busy server): the holder's announcement went out before it landed, so the loser
// must read once the late acknowledgement comes, not sleep its whole lockPollInterval. Before, the
// time-out dropped the loser's confirmation for good, and the channel stayed "not confirmed" for
// the key's later herds. The loser's connections go through the proxy, which holds its SUBSCRIBE.

const prefix = randomPrefix('chaos-late-subscribe');
const OPERATION_TIMEOUT = 300;
// The holder's fill outlives the loser's operationTimeout but ends before its SUBSCRIBE lands.
const HELD_MS = 600;
const SUBSCRIBE_DELAY_MS = 1_500;
let direct: Redis;
let proxied: Redis;
let proxy: ChaosProxy;
const caches: RedisCache[] = [];

beforeAll(async () => {
  const redis = await sharedRedis();
  direct = new Redis(redis.url);
  proxy = await startProxy(redis.port, redis.host);
  proxied = new Redis(proxy.url(redis.auth));
  await proxied.ping();
});

afterAll(async () => {
  proxy?.set({ kind: 'pass' });
  await Promise.all(caches.map((cache) => cache.close()));
  proxied?.disconnect();
  await proxy?.close();
  await deletePrefix(direct, prefix);
  direct.disconnect();
  await (await testRedis()).stop();
});

describe('a SUBSCRIBE acknowledged after operationTimeout', () => {
  it("wakes the loser when it lands (one read), for this herd and the key's next", async () => {
    const options = {
      ttl: 60_000,
      distributedFillLock: true,
      lockPollInterval: 20_000,
      lockWaitTimeout: 60_000,
    };
    const holder = createRedisCache({ client: direct, prefix, name: 'late-holder' });
    const loserCache = createRedisCache({
      client: proxied,
      prefix,
      name: 'late-loser',
      operationTimeout: OPERATION_TIMEOUT,
    });
    caches.push(holder, loserCache);
    await sleep(200); // both warmed up (scripts, clock, subscriber connections)
    resetStats();
    const timedOut: StampedeEvent[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type !== 'backend-error' || event.operation !== 'subscribe') return;
      timedOut.push(event);
      proxy.set({ kind: 'pass' });
    });
    try {
      for (const [round, key] of ['first', 'second'].entries()) {
        // The loser as the core sees it, except that its SUBSCRIBE is held by the proxy for longer
        // than operationTimeout (only on the key's first herd: the channel lingers after it).
        const loser: Cache = {
          ...loserCache,
          onFillDone(listenKey, listener, ready) {
            // Held from here until it has timed out (see the listener below); its acknowledgement
            // then comes back at once.
            if (round === 0) proxy.set({ kind: 'latency', ms: SUBSCRIBE_DELAY_MS });
            return loserCache.onFillDone(listenKey, listener, ready);
          },
        };
        const herdKey = `herd-${key}`;
        let loserCall: Promise<string> | undefined;
        let loserStarted = 0;
        let announcedAt = 0;
        const loserFill = vi.fn(() => 'loser');
        const held = await getOrComputeWith(holder, herdKey, options, async () => {
          loserStarted = performance.now();
          loserCall = getOrComputeWith(loser, herdKey, options, loserFill);
          // The loser has lost its lock attempt (and is subscribing) before the fill's time runs.
          await vi.waitFor(() => expect(statsByCache()['late-loser']?.lockContended).toBe(round + 1), {
            interval: 1,
            timeout: 10_000,
          });
          await sleep(HELD_MS);
          announcedAt = performance.now();
          return 'held';
        });
        expect(held).toBe('held');
        expect(await loserCall).toBe('held');
        const answered = performance.now();
        expect(loserFill).not.toHaveBeenCalled();
        // Polling alone would answer after lockPollInterval (20 s).
        expect(answered - loserStarted).toBeLessThan(HELD_MS + 5_000);
        console.log(
          `[late subscribe] herd ${round + 1}: loser answered ${Math.round(answered - announcedAt)} ms after the fill ended`,
        );
        await vi.waitFor(() => expect(inFlightCount(holder)).toBe(0));
      }
      expect(timedOut.length).toBe(1);
    } finally {
      stop();
    }
  });
});
