import { getOrComputeWith } from '@stampede/core';
import { deferred, type RedisServer, startRedisServer, testRedis, waitFor } from '@stampede/test-support';
import { startUpstashRestServer, type UpstashRestServer } from '@stampede/upstash-rest-server';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstashCache, upstashKeys } from '../src/index.js';
import { type Harness, startHarness, upstashClient } from './harness.js';

// Values through the harness's REST server (the test Redis); locks and announcements through a second
// REST server in front of a Redis started here (as a second Upstash database would be).
let h: Harness;
let lockRedis: RedisServer;
let lockRest: UpstashRestServer;
let values: IORedis;
let locks: IORedis;

beforeAll(async () => {
  h = await startHarness('upstash-lock-client');
  lockRedis = await startRedisServer(['--maxmemory-policy', 'noeviction']);
  lockRest = await startUpstashRestServer({ redisUrl: lockRedis.url });
  values = new IORedis((await testRedis()).url);
  locks = new IORedis(lockRedis.url);
});

afterAll(async () => {
  values?.disconnect();
  locks?.disconnect();
  await lockRest?.close();
  await lockRedis?.stop();
  await h?.stop();
});

describe('lockClient', () => {
  it('keeps the lock and its announcement on the lock database, the value on the main one: 1 fill, the loser woken by push', async () => {
    const prefix = h.nextPrefix();
    const [a, b] = [0, 1].map(() =>
      createUpstashCache({
        client: h.client(),
        lockClient: upstashClient(lockRest.url, lockRest.token),
        prefix,
      }),
    );
    const release = deferred<string>();
    const options = {
      ttl: 60_000,
      distributedFillLock: true,
      lockPollInterval: 120_000,
      lockWaitTimeout: 120_000,
    };
    let fills = 0;
    const fill = () => {
      fills++;
      return release.promise;
    };
    // biome-ignore lint/style/noNonNullAssertion: two caches were made
    const holder = getOrComputeWith(a!, 'k', options, fill);
    const { lock, channel, value } = upstashKeys(prefix, 'k');
    await waitFor(async () => (await locks.exists(lock)) === 1, {
      timeout: 5_000,
      message: 'the lock on the lock server',
    });
    expect(await values.exists(lock)).toBe(0);
    // biome-ignore lint/style/noNonNullAssertion: as above
    const loser = getOrComputeWith(b!, 'k', options, fill);
    await waitFor(
      async () => Number(((await locks.pubsub('NUMSUB', channel)) as [string, number])[1]) === 1,
      {
        timeout: 5_000,
        message: "the loser's subscription on the lock server",
      },
    );
    release.resolve('v');
    expect(await Promise.all([holder, loser])).toEqual(['v', 'v']);
    expect(fills).toBe(1);
    expect(await values.exists(value)).toBe(1);
    expect(await locks.exists(value)).toBe(0);
    await waitFor(async () => (await locks.exists(lock)) === 0, { timeout: 5_000, message: 'the release' });
  });

  it('is checked like client, naming the option', () => {
    expect(() => createUpstashCache({ client: h.client(), lockClient: {} as never })).toThrow(
      /options\.lockClient must be a Redis from @upstash\/redis/,
    );
    // A misspelt option (here waitUntil, which edge runtimes need) would otherwise be ignored.
    expect(() => createUpstashCache({ client: h.client(), waituntil: () => {} } as never)).toThrow(
      new TypeError("options.waituntil is not an option (did you mean 'waitUntil'?)"),
    );
  });
});
