import { type FillOutcome, getOrComputeWith, inFlightCount, invalidate } from '@stampede/core';
import { delay, waitFor } from '@stampede/test-support';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createContext } from '../src/context.js';
import { fillLockHandle } from '../src/fill-lock.js';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';

/** The slow fill of the lock-extension test: over three times its lockTtl (300 ms), on purpose. */
const LONG_FILL_MS = 1_000;
/** The fill whose end the lock loser must hear by push: far shorter than its 1 s poll interval. */
const PUSHED_FILL_MS = 300;

/** Subscribers of `channel` (summed over every node of a cluster: each counts only its own). */
async function subscribers(client: Redis | Cluster, channel: string): Promise<number> {
  const nodes = 'nodes' in client ? client.nodes('all') : [client];
  let total = 0;
  for (const node of nodes) total += Number(((await node.pubsub('NUMSUB', channel)) as [string, number])[1]);
  return total;
}

/** What the lock tests need: a connected client and a prefix of their own. */
export interface LockSetup {
  client(): Promise<Redis | Cluster>;
  prefix: string;
}

/** The fill-lock and push wake-up tests, run against a standalone Redis and a Redis Cluster. */
export function describeLockBehaviour(name: string, setup: LockSetup): void {
  describe(`fill lock and push wake-up: ${name}`, () => {
    const caches: RedisCache[] = [];
    let count = 0;
    const newCache = async (options: { pushWakeUp?: boolean; tombstoneTtl?: number } = {}) => {
      // Each cache object is a separate core state: as far as coalescing goes, another replica.
      const cache = createRedisCache({
        client: await setup.client(),
        prefix: setup.prefix,
        name: `lock-${count++}`,
        ...options,
      });
      caches.push(cache);
      return cache;
    };

    afterAll(async () => {
      await Promise.all(caches.map((cache) => cache.close()));
    });

    it('refuses a release with no outcome (a TypeError), and leaves the lock to a good release', async () => {
      const cache = await newCache();
      const client = await setup.client();
      const lockKey = redisKeys(setup.prefix, 'bad-release').lock;
      const lock = await cache.tryAcquireFillLock?.('bad-release', 2_000);
      await expect(lock?.release(undefined as never)).rejects.toThrow(
        new TypeError("outcome must be 'filled' or 'failed'; got undefined"),
      );
      expect(await client.get(lockKey)).not.toBeNull();
      await lock?.release('filled');
      expect(await client.get(lockKey)).toBeNull();
    });

    it('cannot be released or extended by a foreign token', async () => {
      const cache = await newCache();
      const client = await setup.client();
      const lockKey = redisKeys(setup.prefix, 'foreign').lock;
      const lock = await cache.tryAcquireFillLock?.('foreign', 2_000);
      expect(lock).toBeDefined();
      const owner = await client.get(lockKey);
      const foreign = fillLockHandle(
        createContext(client, 'foreign', setup.prefix, 1_000),
        'foreign',
        'not-the-token',
      );
      expect(await foreign.extend?.(60_000)).toBe(false);
      expect(await client.pttl(lockKey)).toBeLessThanOrEqual(2_000);
      await foreign.release('filled');
      expect(await client.get(lockKey)).toBe(owner);
      expect(await cache.tryAcquireFillLock?.('foreign', 2_000)).toBeUndefined();
      expect(await lock?.extend?.(5_000)).toBe(true);
      expect(await client.pttl(lockKey)).toBeGreaterThan(2_000);
      await lock?.release('filled');
      expect(await client.exists(lockKey)).toBe(0);
      expect(await lock?.extend?.(5_000)).toBe(false);
    });

    it('does not let a lapsed holder extend the next holder', async () => {
      const cache = await newCache();
      const client = await setup.client();
      const old = await cache.tryAcquireFillLock?.('lapsed', 100);
      const lockKey = redisKeys(setup.prefix, 'lapsed').lock;
      await waitFor(async () => (await client.exists(lockKey)) === 0, {
        timeout: 2_000,
        message: 'the 100 ms lock to lapse',
      });
      const current = await cache.tryAcquireFillLock?.('lapsed', 1_500);
      expect(current).toBeDefined();
      expect(await old?.extend?.(60_000)).toBe(false);
      expect(await client.pttl(redisKeys(setup.prefix, 'lapsed').lock)).toBeLessThanOrEqual(1_500);
      await current?.release('failed');
    });

    it('keeps a fill longer than lockTtl single (the core extends the lock)', async () => {
      const [a, b] = [await newCache(), await newCache()];
      let fills = 0;
      const fill = async () => {
        fills++;
        await delay(LONG_FILL_MS);
        return 'slow';
      };
      const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 300, lockWaitTimeout: 10_000 };
      const first = getOrComputeWith(a, 'long-fill', options, fill);
      // `a` holds the lock and is filling before `b` asks.
      await waitFor(() => fills === 1, { message: 'the first replica to start its fill' });
      const second = getOrComputeWith(b, 'long-fill', options, fill);
      expect(await Promise.all([first, second])).toEqual(['slow', 'slow']);
      expect(fills).toBe(1);
    });

    it("lets another replica fill once a crashed holder's lock lapses", async () => {
      const [crashed, survivor] = [await newCache(), await newCache()];
      // Taken and never released nor extended: what a SIGKILLed holder leaves behind.
      expect(await crashed.tryAcquireFillLock?.('crash', 400)).toBeDefined();
      const started = Date.now();
      let fills = 0;
      const value = await getOrComputeWith(
        survivor,
        'crash',
        { ttl: 60_000, distributedFillLock: true, lockTtl: 400, lockWaitTimeout: 10_000 },
        () => {
          fills++;
          return 'survivor';
        },
      );
      expect(value).toBe('survivor');
      expect(fills).toBe(1);
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('announces filled and failed to listeners on other connections, and stops when asked', async () => {
      const [holder, waiter] = [await newCache(), await newCache()];
      const announce = async (outcome: FillOutcome) =>
        (await holder.tryAcquireFillLock?.('announced', 2_000))?.release(outcome);
      const client = await setup.client();
      const { channel } = redisKeys(setup.prefix, 'announced');
      // A probe on the same key shares the waiter's one subscription (and connection).
      const probe: FillOutcome[] = [];
      const stopProbe = waiter.onFillDone('announced', (outcome) => probe.push(outcome));
      // The subscription is asynchronous: wait until Redis counts the subscriber.
      await waitFor(async () => (await subscribers(client, channel)) > 0, {
        message: 'the subscription to land',
      });
      const heard: FillOutcome[] = [];
      const stop = waiter.onFillDone('announced', (outcome) => heard.push(outcome));
      await announce('filled');
      await announce('failed');
      await waitFor(() => heard.length >= 2, { timeout: 2_000, message: 'both announcements' });
      expect(heard).toEqual(['filled', 'failed']);
      stop();
      // The probe still listens: the message it hears reaches every listener of the key in one
      // dispatch, so `heard` would get it too if stop() had not removed it.
      const probed = probe.length;
      await announce('filled');
      await waitFor(() => probe.length > probed, { timeout: 2_000, message: 'the probe to hear' });
      expect(heard).toEqual(['filled', 'failed']);
      stopProbe();
    });

    it("a delete during another replica's locked fill keeps its older value out, however long the fill outlives tombstoneTtl", async () => {
      // The holder's lock (300 ms, extended by the core while the fill runs) carries the tombstone:
      // before, the tombstone lapsed after tombstoneTtl and the fill wrote the value it read before
      // the delete (as a lock-free fill still does: bounded by tombstoneTtl, see the README).
      const [filler, deleter] = [
        await newCache({ tombstoneTtl: 200 }),
        await newCache({ tombstoneTtl: 200 }),
      ];
      const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 300 };
      let filling = false;
      const slow = getOrComputeWith(filler, 'outlived', options, async () => {
        filling = true;
        await delay(1_000);
        return 'read before the delete';
      });
      await waitFor(() => filling, { message: 'the fill to start' });
      await invalidate(deleter, 'outlived');
      expect(await slow).toBe('read before the delete');
      await waitFor(() => inFlightCount(filler) === 0, { message: 'the commit to settle' });
      expect(await deleter.get('outlived')).toBeUndefined();
      expect(await getOrComputeWith(deleter, 'outlived', options, () => 'after the delete')).toBe(
        'after the delete',
      );
    });

    it('wakes a lock loser long before its first poll', async () => {
      const [a, b] = [await newCache(), await newCache()];
      const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 1_000 };
      let filling = false;
      const first = getOrComputeWith(a, 'woken', options, async () => {
        filling = true;
        await delay(PUSHED_FILL_MS);
        return 'pushed';
      });
      // `a` holds the lock and is filling before `b` asks.
      await waitFor(() => filling, { message: 'the first replica to start its fill' });
      const started = Date.now();
      expect(await getOrComputeWith(b, 'woken', options, () => 'local')).toBe('pushed');
      const waited = Date.now() - started;
      await first;
      // The first poll would come 1 s after losing; the push arrives when the 300 ms fill ends.
      expect(waited).toBeLessThan(900);
    });
  });
}
