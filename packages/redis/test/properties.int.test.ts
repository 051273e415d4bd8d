import * as core from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { runSchedule, type ScheduleTarget, scheduleArbitrary } from '@stampede/test-support/schedules';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const prefix = randomPrefix('schedules');
const clients: Redis[] = [];
let run = 0;

beforeAll(async () => {
  const { url } = await testRedis();
  for (let i = 0; i < 3; i++) clients.push(new Redis(url));
});
afterAll(async () => {
  await deletePrefix(clients[0] as Redis, prefix);
  for (const client of clients) client.disconnect();
  await (await testRedis()).stop();
});

// Up to three replicas in this process, each a cache on its own connection (its own single-flight
// registry, as separate processes would have), with the fill lock, in real time: durations are short.
const target: ScheduleTarget<RedisCache> = {
  api: core,
  clock: { advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) },
  durations: {
    ttl: 60,
    grace: 150,
    fillMs: 30,
    fillTimeout: 80,
    abortAfter: 40,
    advance: 60,
    lockTtl: 500,
    lockWaitTimeout: 150,
    lockPollInterval: 5,
  },
  lock: true,
  maxReplicas: 3,
  // Redis orders a fill against a delete or a newer write on its own clock, which each replica
  // estimates to within the fastest round trip it has measured (re-measured within 250 ms while that
  // is over 10 ms, as on a loaded machine): a value produced that close to a write may go either way.
  orderingSlackMs: 25,
  // Plain Redis caches: another replica's invalidation does not reach this process, so a caller here
  // may still join this replica's fill that answered while its write is on its way (README, fail-safe).
  joinsWritingFlights: true,
  replicas(count, variant) {
    run++;
    const caches = clients.slice(0, count).map((client, index) =>
      createRedisCache({
        client,
        prefix: `${prefix}${run}:`,
        name: `redis-schedule-${run}-${index}`,
        pushWakeUp: (variant & 2) === 2,
      }),
    );
    return {
      caches,
      names: caches.map((cache) => cache.name),
      remove: (cache, key) => cache.delete(key),
      close: async () => void (await Promise.all(caches.map((cache) => cache.close()))),
    };
  },
};

describe('replicas on Redis with the fill lock, under random schedules', () => {
  it('keep every invariant (no hang, no older value after a write, empty registries, counter identities)', async () => {
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(target, 40), (schedule) => runSchedule(target, schedule)),
      // Real time: no shrinking (a failure is reported as found, with its seed).
      { numRuns: 40, endOnFailure: true },
    );
  }, 180_000);
});

describe('replicas on Redis with tags, under random schedules', () => {
  it('never serve a tagged value older than a tag invalidation that resolved before the call', async () => {
    const tagged = { ...target, tags: true };
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(tagged, 25), (schedule) => runSchedule(tagged, schedule)),
      { numRuns: 25, endOnFailure: true },
    );
  }, 300_000);
});

// The same replicas behind tiered caches (a memory L1 each, kept coherent by the Redis bus). A
// write resolves once every other replica has applied it, fills and shared reads in flight there
// included, so the strict check holds: no caller that starts after a write resolved gets an older
// value, even from its own replica's fill that is still writing.
const tieredTarget: ScheduleTarget<core.TieredCache> = {
  ...(target as unknown as ScheduleTarget<core.TieredCache>),
  tags: true,
  joinsWritingFlights: false,
  writesReachEveryReplica: true,
  async replicas(count, variant) {
    run++;
    const remotes = clients.slice(0, count).map((client, index) =>
      createRedisCache({
        client,
        prefix: `${prefix}${run}:`,
        name: `redis-tiered-schedule-${run}-${index}-l2`,
        pushWakeUp: (variant & 2) === 2,
      }),
    );
    const caches = remotes.map((remote, index) =>
      core.createTieredCache({
        local: createMemoryCache({ name: `redis-tiered-schedule-${run}-${index}-l1` }),
        remote,
        name: `redis-tiered-schedule-${run}-${index}`,
      }),
    );
    // Every replica hears the bus before the schedule starts (a message sent earlier reaches no one).
    const heard = () => caches.map((cache) => core.statsByCache()[cache.name as string]?.busEvictions ?? 0);
    await waitFor(
      async () => {
        const before = heard();
        for (const cache of caches) await core.setValue(cache, '__bus_probe', 1, { ttl: 1_000 });
        const after = heard();
        return after.every((count, index) => count - (before[index] ?? 0) >= caches.length - 1);
      },
      { message: 'every tiered replica to hear the others on the bus' },
    );
    return {
      caches,
      names: caches.map((cache) => cache.name as string),
      remove: (cache, key) => cache.delete(key),
      close: async () => {
        await Promise.all(caches.map((cache) => cache.close()));
        await Promise.all(remotes.map((remote) => remote.close()));
      },
    };
  },
};

describe('tiered replicas (memory L1 on Redis) with tags, under random schedules', () => {
  it('never serve a value older than a write or tag invalidation that resolved before the call', async () => {
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(tieredTarget, 25), (schedule) =>
        runSchedule(tieredTarget, schedule),
      ),
      { numRuns: 25, endOnFailure: true },
    );
  }, 300_000);
});
