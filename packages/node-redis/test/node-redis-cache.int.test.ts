import { createHash } from 'node:crypto';
import { type AddressInfo, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  createTieredCache,
  getOrComputeWith,
  getValue,
  invalidateTag,
  setValue,
  statsByCache,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { TIME_SCRIPT } from '@stampede/redis-protocol';
import { hasFastProperties, randomPrefix, runToExit, testRedis, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeRedisCache, isNodeRedisCacheError, type NodeRedisClient } from '../src/index.js';
import { connectedClient, deletePrefixWith } from './helpers.js';

const CLOSE_AT_ONCE = fileURLToPath(new URL('./fixtures/close-at-once.mjs', import.meta.url));
let url: string;
let observer: Redis;

beforeAll(async () => {
  url = (await testRedis()).url;
  observer = new Redis(url);
});
afterAll(() => {
  observer.disconnect();
});

/** How many connections carry `name` (a duplicate inherits its client's name). */
async function connectionsNamed(name: string): Promise<number> {
  const list = String(await observer.client('LIST'));
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

async function namedClient() {
  const name = `nr${Math.random().toString(36).slice(2)}`;
  const client = createClient({ url, name });
  client.on('error', () => {});
  await client.connect();
  return { client, name };
}

describe('the fill lock', () => {
  it('is reached on a cache object V8 keeps in fast mode, for every cache made', async () => {
    // The fill-lock members are accessors every cache shares (defineFillLockMembers): written in
    // the literal, or as a closure per cache, they kept the object in dictionary mode.
    const client = await connectedClient();
    const prefix = randomPrefix('node-redis-fast');
    const caches = [1, 2, 3].map(() => createNodeRedisCache({ client, prefix }));
    try {
      expect(caches.map((cache) => hasFastProperties(cache))).toEqual([true, true, true]);
      const lock = await caches[1]?.tryAcquireFillLock?.('k', 2_000);
      expect(lock).toBeDefined();
      await lock?.release('failed');
    } finally {
      await Promise.all(caches.map((cache) => cache.close()));
      await deletePrefixWith(client, prefix);
      await client.close();
    }
  });

  // node-redis's encoder threw on the missing argument where no caller could catch it: the process
  // ended with an uncaught TypeError.
  it('refuses a release with no outcome (a TypeError), and leaves the lock to a good release', async () => {
    const client = await connectedClient();
    const prefix = randomPrefix('node-redis-bad-release');
    const cache = createNodeRedisCache({ client, prefix });
    try {
      const lock = await cache.tryAcquireFillLock?.('k', 2_000);
      await expect(lock?.release(undefined as never)).rejects.toThrow(
        new TypeError("outcome must be 'filled' or 'failed'; got undefined"),
      );
      expect(await cache.tryAcquireFillLock?.('k', 2_000)).toBeUndefined();
      await lock?.release('filled');
      const again = await cache.tryAcquireFillLock?.('k', 2_000);
      expect(again).toBeDefined();
      await again?.release('failed');
    } finally {
      await cache.close();
      await deletePrefixWith(client, prefix);
      client.destroy();
    }
  });
});

describe('createNodeRedisCache options', () => {
  it('applies the shared defaults and names itself node-redis', async () => {
    const client = await connectedClient();
    const cache = createNodeRedisCache({ client });
    expect([cache.name, cache.prefix, cache.client]).toEqual(['node-redis', 'stampede:', client]);
    await cache.close();
    client.destroy();
  });

  it('rejects what is not a node-redis client, and bad options, naming the option', () => {
    expect(() => createNodeRedisCache({ client: {} as NodeRedisClient })).toThrow(/options\.client/);
    const client = createClient({ url });
    expect(() => createNodeRedisCache({ client, pushWakeUp: 'yes' as never })).toThrow(/options\.pushWakeUp/);
    expect(() => createNodeRedisCache({ client, operationTimeout: 0 })).toThrow(RangeError);
    expect(() => createNodeRedisCache({ client, prefix: 'a{}' })).toThrow(RangeError);
    expect(() => createNodeRedisCache({ client, pushWakeup: false } as never)).toThrow(
      new TypeError("options.pushWakeup is not an option (did you mean 'pushWakeUp'?)"),
    );
    // A createCluster() client has a client's commands, but its tagged writes and reads fail (a
    // script touching keys of other slots): every call would fill, seen only as backend errors.
    const cluster = createCluster({ rootNodes: [{ url }] });
    expect(() => createNodeRedisCache({ client: cluster as unknown as NodeRedisClient })).toThrow(
      /options\.client is a node-redis cluster \(createCluster\(\)\).*@stampede\/redis with an ioredis Cluster/,
    );
    expect(() => createNodeRedisCache({ client, lockClient: cluster as unknown as NodeRedisClient })).toThrow(
      /options\.lockClient is a node-redis cluster/,
    );
  });

  it('bounds every call by operationTimeout with a NodeRedisCacheError', async () => {
    // A server that accepts and never answers: the client's commands wait in its queue for ever.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const client = createClient({ url: `redis://127.0.0.1:${port}` });
    client.on('error', () => {});
    client.connect().catch(() => {});
    const cache = createNodeRedisCache({ client, operationTimeout: 50 });
    const error = await cache.delete('k').catch((caught: unknown) => caught);
    expect(isNodeRedisCacheError(error)).toBe(true);
    expect(error).toMatchObject({ name: 'NodeRedisCacheError', code: 'E_STAMPEDE_BACKEND_TIMEOUT' });
    client.destroy();
    silent.close();
  });
});

describe('the subscriber connection', () => {
  it('opens as the cache is created (before any wait), and close() closes it but never the client', async () => {
    const { client, name } = await namedClient();
    const cache = createNodeRedisCache({ client, prefix: randomPrefix('nr-sub') });
    await waitFor(async () => (await connectionsNamed(name)) === 2, { timeout: 5_000 });
    // The first wait uses it: no third connection.
    const stop = cache.onFillDone('k', () => {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await connectionsNamed(name)).toBe(2);
    stop();
    await cache.close();
    await waitFor(async () => (await connectionsNamed(name)) === 1, { timeout: 5_000 });
    expect(client.isOpen).toBe(true);
    client.destroy();
  });

  it("ends with the user's client, without cache.close()", async () => {
    const { client, name } = await namedClient();
    const cache = createNodeRedisCache({ client, prefix: randomPrefix('nr-end') });
    cache.onFillDone('k', () => {});
    await waitFor(async () => (await connectionsNamed(name)) === 2, { timeout: 5_000 });
    await client.close();
    await waitFor(async () => (await connectionsNamed(name)) === 0, { timeout: 5_000 });
    // A closed client opens no new subscriber.
    cache.onFillDone('j', () => {});
    expect(await connectionsNamed(name)).toBe(0);
  });

  it('twelve caches on one client follow its end through one listener: no MaxListenersExceededWarning', async () => {
    const { client, name } = await namedClient();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const caches = Array.from({ length: 12 }, () =>
        createNodeRedisCache({ client, prefix: randomPrefix('nr-many') }),
      );
      await waitFor(async () => (await connectionsNamed(name)) === 13, { timeout: 5_000 });
      expect(client.listenerCount('end')).toBe(1);
      // A closed cache leaves the others following the client.
      await caches[0]?.close();
      expect(client.listenerCount('end')).toBe(1);
      await client.close();
      await waitFor(async () => (await connectionsNamed(name)) === 0, { timeout: 5_000 });
      expect(client.listenerCount('end')).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it.each([
    ['closed at once, then its client', true],
    ['its client closed at once (no cache.close())', false],
  ])('%s, while its subscriber still connects: the process exits', async (_, closeCache) => {
    const run = await runToExit(
      CLOSE_AT_ONCE,
      [JSON.stringify({ url, prefix: randomPrefix('nr-close'), closeCache })],
      { limitMs: 5_000 },
    );
    expect(run.stdout.trim()).toBe('closed');
    expect(run.code).toBe(0);
  });

  it('is never opened with pushWakeUp: false', async () => {
    const { client, name } = await namedClient();
    const cache = createNodeRedisCache({ client, prefix: randomPrefix('nr-poll'), pushWakeUp: false });
    cache.onFillDone('k', () => {})();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await connectionsNamed(name)).toBe(1);
    client.destroy();
  });
});

describe('push wake-up with the value', () => {
  it("a loser on a lingering channel hears first, and takes the holder's value from the announcement: read and lock attempt only", async () => {
    const prefix = randomPrefix('nr-announce');
    const holderClient = await connectedClient();
    const loserClient = await connectedClient();
    const holder = createNodeRedisCache({ client: holderClient, prefix, name: 'nr-announce-holder' });
    const loser = createNodeRedisCache({ client: loserClient, prefix, name: 'nr-announce-loser' });
    try {
      // A waiter before: `ready` once SUBSCRIBE is acknowledged, then the channel lingers.
      await new Promise<void>((resolve) => {
        const stop = loser.onFillDone(
          'k',
          () => {},
          () => {
            stop();
            resolve();
          },
        );
      });
      await waitFor(() => loser.hearsFillDone('k'));
      const attempts: string[] = [];
      const get = loser.get.bind(loser);
      const tryAcquire = loser.tryAcquireFillLockAndRead?.bind(loser);
      const counted = {
        ...loser,
        get: (key: string) => {
          attempts.push('read');
          return get(key);
        },
        tryAcquireFillLockAndRead: (key: string, ttl: number) => {
          attempts.push('lock-and-read');
          // biome-ignore lint/style/noNonNullAssertion: the cache has the capability
          return tryAcquire!(key, ttl);
        },
        hearsFillDone: (key: string) => loser.hearsFillDone(key),
        onFillDone: loser.onFillDone.bind(loser),
      };
      const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 2_000 };
      let loserCall: Promise<unknown> | undefined;
      const held = await getOrComputeWith(holder, 'k', options, async () => {
        loserCall = getOrComputeWith(counted, 'k', options, () => 'loser');
        await waitFor(() => statsByCache()['nr-announce-loser']?.lockContended === 1);
        return { by: 'holder' };
      });
      expect(held).toEqual({ by: 'holder' });
      expect(await loserCall).toEqual({ by: 'holder' });
      expect(attempts).toEqual(['read', 'lock-and-read']);
    } finally {
      await holder.close();
      await loser.close();
      holderClient.destroy();
      loserClient.destroy();
    }
  });
});

describe('close() on shutdown', () => {
  it("waits for the cache's fill in flight: its value is stored and the lock released before the client quits", async () => {
    const prefix = randomPrefix('nr-shutdown');
    const closing = await connectedClient();
    const staying = await connectedClient();
    const holder = createNodeRedisCache({ client: closing, prefix, name: 'nr-shutdown-holder' });
    const other = createNodeRedisCache({ client: staying, prefix, name: 'nr-shutdown-other' });
    try {
      const options = { ttl: 60_000, distributedFillLock: true };
      let filling: () => void = () => {};
      const started = new Promise<void>((resolve) => {
        filling = resolve;
      });
      const held = getOrComputeWith(holder, 'k', options, async () => {
        filling();
        await new Promise((resolve) => setTimeout(resolve, 300));
        return 'from the closing replica';
      });
      await started;
      // The README's shutdown: the cache, then the client. Before close() waited, the write and the
      // release went to a closed client and the other replica waited out lockWaitTimeout (5 s).
      await holder.close();
      await closing.quit();
      expect(await held).toBe('from the closing replica');
      let fills = 0;
      const value = await getOrComputeWith(other, 'k', options, () => {
        fills++;
        return 'filled again';
      });
      expect(value).toBe('from the closing replica');
      expect(fills).toBe(0);
      expect(statsByCache()['nr-shutdown-holder']?.backendErrors ?? 0).toBe(0);
    } finally {
      await other.close();
      await deletePrefixWith(staying, prefix);
      staying.destroy();
    }
  });

  it("a tiered cache on it, shut down in the README's order, reports no fault", async () => {
    const prefix = randomPrefix('nr-tiered-shutdown');
    const client = await connectedClient();
    const remote = createNodeRedisCache({ client, prefix, name: 'nr-tiered-shutdown-remote' });
    const tiered = createTieredCache({ local: createMemoryCache(), remote, name: 'nr-tiered-shutdown' });
    await getOrComputeWith(tiered, 'k', { ttl: 60_000 }, () => 1);
    // The bus is subscribed (the tiered cache cleared L1 on the acknowledgement), so close() sends
    // an UNSUBSCRIBE that the remote's close() then cuts short.
    await waitFor(
      async () => ((await observer.pubsub('NUMSUB', `${prefix}bus`)) as [string, number])[1] === 1,
      {
        message: 'the bus subscribed',
      },
    );
    await tiered.close();
    await remote.close();
    await deletePrefixWith(client, prefix);
    client.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(statsByCache()['nr-tiered-shutdown-remote']?.backendErrors ?? 0).toBe(0);
    expect(statsByCache()['nr-tiered-shutdown']?.backendErrors ?? 0).toBe(0);
  });
});

describe('tags', () => {
  // Its clock script (TIME) answered 50 ms late, as a measurement whose request was slow and whose
  // reply fast leaves it: the estimate of Redis's clock runs ahead. A tagged setValue is dated by
  // Redis itself, so an invalidation made after it resolved still covers it.
  it('a setValue by a cache whose estimate of the server clock runs ahead is covered by a later invalidateTag', async () => {
    const client = await connectedClient();
    const steadyClient = await connectedClient();
    const timeSha = createHash('sha1').update(TIME_SCRIPT.source).digest('hex');
    const evalSha = client.evalSha.bind(client);
    const evaluate = client.eval.bind(client);
    Object.assign(client, {
      evalSha: async (sha: string, options: Parameters<typeof evalSha>[1]) => {
        const reply = await evalSha(sha, options);
        return sha === timeSha ? Number(reply) + 50 : reply;
      },
      eval: async (script: string, options: Parameters<typeof evaluate>[1]) => {
        const reply = await evaluate(script, options);
        return script === TIME_SCRIPT.source ? Number(reply) + 50 : reply;
      },
    });
    const prefix = randomPrefix('node-redis-tags');
    const writer = createNodeRedisCache({ client, prefix, name: 'ahead' });
    const steady = createNodeRedisCache({ client: steadyClient, prefix, name: 'steady' });
    try {
      await getValue(writer, 'warm');
      for (let n = 0; n < 5; n++) {
        await setValue(writer, `k${n}`, 'old', { ttl: 60_000, tags: [`t${n}`] });
        await invalidateTag(steady, `t${n}`);
        expect(await getValue(steady, `k${n}`)).toBeUndefined();
        expect(await getValue(writer, `k${n}`)).toBeUndefined();
      }
    } finally {
      await writer.close();
      await steady.close();
      await deletePrefixWith(steadyClient, prefix);
      client.destroy();
      steadyClient.destroy();
    }
  });
});
