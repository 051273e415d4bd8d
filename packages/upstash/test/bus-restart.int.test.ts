import { type Cache, createTieredCache, getValue, setValue, statsByCache } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { createRedisCache } from '@stampede/redis';
import { busChannel, createOperationRunner } from '@stampede/redis-protocol';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { startUpstashRestServer, type UpstashRestServer } from '@stampede/upstash-rest-server';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createUpstashBus } from '../src/bus.js';
import { UpstashCacheError } from '../src/errors.js';
import { createUpstashCache } from '../src/index.js';
import { BUS_PING } from '../src/stream-liveness.js';
import { upstashClient } from './harness.js';

let redisUrl: string;
let io: IORedis;
const prefix = randomPrefix('upstash-bus-restart');
beforeAll(async () => {
  redisUrl = (await testRedis()).url;
  io = new IORedis(redisUrl);
});
afterAll(async () => {
  await deletePrefix(io, prefix);
  io.disconnect();
});

const stat = (name: string, counter: 'busRecoveries' | 'busEvictions'): number =>
  statsByCache()[name]?.[counter] ?? 0;

describe('the Upstash bus after its stream broke', () => {
  // A restart breaks every stream after its acknowledgement: `@upstash/redis` only logs that
  // ("Stream reading error"), and its subscription reports no error. The new server has no
  // subscriber until the bus opens its stream again.
  it('a REST server restarted on its port: the bus notices, opens its stream again, L1 is cleared and later evictions are heard', async () => {
    let server: UpstashRestServer = await startUpstashRestServer({ redisUrl });
    const { port, token } = server;
    const client = upstashClient(server.url, token);
    const remote = createUpstashCache({ client, prefix, name: 'restart-up-remote' });
    // The cache's own bus, with checks a few hundred ms apart instead of seconds (the timing itself
    // is tested with fake timers in bus-liveness.test.ts).
    const operations = createOperationRunner({
      name: 'restart-up-remote',
      label: 'upstash',
      operationTimeout: 1_000,
      createError: (...args: ConstructorParameters<typeof UpstashCacheError>) =>
        new UpstashCacheError(...args),
    });
    const bus = createUpstashBus(client, busChannel(prefix), operations, { interval: 200, timeout: 1_000 });
    const up = createTieredCache({
      local: createMemoryCache({ name: 'restart-up-l1' }),
      remote: Object.create(remote, { bus: { value: bus } }) as Cache,
      name: 'restart-up',
      localTtl: 600_000,
    });
    // Another replica, on Redis itself (unaffected by the restart), and a plain cache whose writes
    // send no bus message: only a cleared L1 lets `up` see those.
    const writer = createTieredCache({
      local: createMemoryCache({ name: 'restart-io-l1' }),
      remote: createRedisCache({ client: io, prefix, name: 'restart-io-remote' }),
      name: 'restart-io',
    });
    const plain = createRedisCache({ client: io, prefix, name: 'restart-plain' });
    // What the bus carries, as a raw subscriber hears it (subscribed only while nothing is
    // written: a writer would wait for its acknowledgement).
    const raw = io.duplicate();
    const pings: string[] = [];
    raw.on('message', (_channel: string, message: string) => {
      if (message === BUS_PING) pings.push(message);
    });
    // The client's own log line for the broken stream (it cannot be turned off): kept out of the output.
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      await waitFor(
        async () => {
          await setValue(writer, 'probe', 'x', { ttl: 60_000 });
          return stat('restart-up', 'busEvictions') > 0;
        },
        { timeout: 10_000, message: 'the Upstash replica to hear the bus' },
      );
      await setValue(writer, 'k', 'v1', { ttl: 600_000 });
      expect(await getValue(up, 'k')).toBe('v1'); // now in L1
      await setValue(plain, 'k', 'v1b', { ttl: 600_000 }); // no bus message
      expect(await getValue(up, 'k')).toBe('v1'); // L1 serves its copy

      await server.close();
      server = await startUpstashRestServer({ redisUrl, port, token });
      expect(server.subscriptionCount()).toBe(0);
      await raw.subscribe(busChannel(prefix));

      await waitFor(() => stat('restart-up', 'busRecoveries') === 1, {
        timeout: 10_000,
        message: 'the bus to notice its broken stream and open it again',
      });
      await waitFor(() => server.subscriptionCount() === 1, { timeout: 5_000 });
      // The pings went out on the bus (the one that found the stream lost, and those after).
      await waitFor(() => pings.length > 0, { timeout: 5_000, message: 'a ping on the bus' });
      await raw.unsubscribe();
      // L1 was cleared on the recovery: the remote's value, not the old copy.
      expect(await getValue(up, 'k')).toBe('v1b');
      // And the reopened stream hears the next eviction (L1 holds 'v1b' again meanwhile).
      const evictions = stat('restart-up', 'busEvictions');
      await setValue(writer, 'k', 'v2', { ttl: 600_000 });
      await waitFor(() => stat('restart-up', 'busEvictions') > evictions, {
        timeout: 5_000,
        message: 'the eviction after the restart to be heard',
      });
      expect(await getValue(up, 'k')).toBe('v2');

      // The pings were nothing to the other replica, which heard them too.
      expect(stat('restart-io', 'busEvictions')).toBe(0);
      expect(stat('restart-io', 'busRecoveries')).toBe(0);
    } finally {
      logged.mockRestore();
      await up.close();
      await writer.close();
      raw.disconnect();
      await server.close();
    }
  });
});
