import { getOrComputeWith, inFlightCount, invalidateTag, onStampedeEvent } from '@stampede/core';
import { describeCacheConformance } from '@stampede/test-suite';
import {
  REDIS_PROTOCOL_CAPABILITIES,
  type RedisClusterServer,
  randomPrefix,
  startRedisCluster,
} from '@stampede/test-support';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix, herd, startReplicas, stopWorkers, totals } from './helpers.js';
import { describeLockBehaviour } from './lock-behaviour.js';

// A real 3-master Redis Cluster on free ports, started for this file and stopped after it.
const prefix = randomPrefix('redis-cluster');
let started: Promise<{ server: RedisClusterServer; client: Cluster }> | undefined;
const caches: RedisCache[] = [];
const prefixes = new WeakMap<object, string>();

function cacheOn(client: Cluster, cachePrefix: string): RedisCache {
  const cache = createRedisCache({ client, prefix: cachePrefix });
  caches.push(cache);
  prefixes.set(cache, cachePrefix);
  return cache;
}

function cluster(): Promise<{ server: RedisClusterServer; client: Cluster }> {
  started ??= (async () => {
    const server = await startRedisCluster(3);
    const client = new Cluster([...server.nodes]);
    await client.ping();
    return { server, client };
  })();
  return started;
}

afterAll(async () => {
  if (started === undefined) return;
  const { server, client } = await started;
  await Promise.all(caches.map((cache) => cache.close()));
  await deletePrefix(client, prefix);
  client.disconnect();
  await server.stop();
});

describeCacheConformance({
  name: 'redis (3-master cluster)',
  clock: 'real',
  capabilities: REDIS_PROTOCOL_CAPABILITIES,
  async create() {
    const { client } = await cluster();
    return cacheOn(client, `${prefix}${caches.length}:`);
  },
  // Another replica: a second cache on the same prefix.
  async replica(of) {
    const cachePrefix = prefixes.get(of);
    if (cachePrefix === undefined) throw new Error('replica of an unknown cache');
    return cacheOn((await cluster()).client, cachePrefix);
  },
});

describeLockBehaviour('redis (3-master cluster)', {
  prefix: `${prefix}lock:`,
  client: async () => (await cluster()).client,
});

describe('hash slots (3-master cluster)', () => {
  it.each(['plain', 'a{b}c', '{braces}', '{}', '}{', 'unicode: héllo 🚀'])(
    'puts the value, lock and channel of %j in one slot',
    async (key) => {
      const { client } = await cluster();
      const names = redisKeys(prefix, key);
      const slots = await Promise.all(
        [names.value, names.lock, names.channel].map((name) => client.cluster('KEYSLOT', name)),
      );
      expect(new Set(slots).size).toBe(1);
    },
  );

  it('spreads different keys over the masters', async () => {
    const { client } = await cluster();
    const slots = await Promise.all(
      Array.from({ length: 30 }, (_, i) => client.cluster('KEYSLOT', redisKeys(prefix, `spread-${i}`).value)),
    );
    expect(new Set(slots).size).toBeGreaterThan(20);
  });
});

describe('replica processes on the cluster', () => {
  it('fill once in total for 3 replicas x 100 callers with distributedFillLock', async () => {
    const { server } = await cluster();
    const workers = await startReplicas(3, { clusterNodes: server.nodes, prefix: `${prefix}fleet:` });
    try {
      const sum = totals(
        await herd(workers, {
          key: 'cluster-herd',
          callers: 100,
          fillMs: 300,
          options: { ttl: 60_000, distributedFillLock: true, lockPollInterval: 1_000 },
        }),
      );
      console.log(
        `[cluster] 3 replicas x 100 callers: ${sum.fills} fill(s), slowest ${sum.maxMs} ms (push wake-up)`,
      );
      expect(sum.errors).toEqual([]);
      expect(sum.answered).toBe(300);
      expect(sum.fills).toBe(1);
    } finally {
      await stopWorkers(workers);
    }
  });
});

describe('tags on the cluster', () => {
  it('spreads tag keys over slots: a tagged read takes the entry, then its tags, without a cross-slot script', async () => {
    const { client } = await cluster();
    const cache = cacheOn(client, `${prefix}tags-apart:`);
    await getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['t1', 't2', 't3'] }, () => 'old');
    const slots = await Promise.all(
      ['t1', 't2', 't3'].map((tag) => client.cluster('KEYSLOT', `${prefix}tags-apart:{${tag}}:tag`)),
    );
    expect(new Set(slots).size).toBeGreaterThan(1);
    await invalidateTag(cache, 't2');
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['t1', 't2', 't3'] }, () => 'new')).toBe(
      'new',
    );
  });

  it("spread tag keys and the lock: the lock attempt's read checks a tagged entry's tags apart, a commit announces it bare", async () => {
    const { client } = await cluster();
    const cache = cacheOn(client, `${prefix}tags-apart-lock:`);
    const options = { ttl: 60_000, tags: ['t1', 't2'], distributedFillLock: true };
    expect(await getOrComputeWith(cache, 'k', options, () => 'old')).toBe('old');
    await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
    const before = await cache.tryAcquireFillLockAndRead?.('k', 5_000);
    expect(before?.entry?.value).toBe('old');
    await before?.lock?.release('failed');
    await invalidateTag(cache, 't2');
    const after = await cache.tryAcquireFillLockAndRead?.('k', 5_000);
    expect(after?.entry).toBeUndefined();
    const lock = after?.lock;
    expect(lock?.commit).toBeDefined();
    const heard: unknown[] = [];
    const stop = cache.onFillDone('k', (outcome, announced) => heard.push([outcome, announced]));
    await vi.waitFor(() => expect(cache.hearsFillDone('k')).toBe(true));
    const now = Date.now();
    await lock?.commit?.(
      {
        value: 'new',
        createdAt: now,
        freshUntil: now + 60_000,
        staleUntil: now + 60_000,
        tags: ['t1', 't2'],
      },
      { ttl: 60_000 },
    );
    // The script could not read the tags' keys (other slots): the value is not carried.
    await vi.waitFor(() => expect(heard).toEqual([['filled', undefined]]));
    stop();
    expect((await cache.get('k'))?.value).toBe('new');
  });

  it('with a prefix that pins one slot, a tagged hit is one script and invalidation still works', async () => {
    const { client } = await cluster();
    const cache = cacheOn(client, `${prefix}{pinned}:`);
    await getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['a', 'b'] }, () => 'old');
    await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0));
    const evalsha = vi.spyOn(client, 'evalsha');
    const get = vi.spyOn(client, 'get');
    expect((await cache.get('k'))?.value).toBe('old');
    const sent = { evalsha: evalsha.mock.calls.length, get: get.mock.calls.length };
    evalsha.mockRestore();
    get.mockRestore();
    expect(sent.get).toBe(0);
    expect(sent.evalsha).toBeGreaterThanOrEqual(1);
    await invalidateTag(cache, 'b');
    expect(await cache.get('k')).toBeUndefined();
  });
});

describe('a Cluster client with keyPrefix', () => {
  // ioredis's Cluster takes `keyPrefix` too; the cache works with `keyPrefix + prefix` as on one
  // server, so a prefixed and a plain client whose prefix is the two together share everything.
  it('shares entries, tags and the lock (woken by push) with a plain client on keyPrefix + prefix', async () => {
    const { server } = await cluster();
    const prefixed = new Cluster([...server.nodes], { keyPrefix: `${prefix}kp:` });
    const a = cacheOn(prefixed, 'shared:');
    try {
      const b = cacheOn((await cluster()).client, `${prefix}kp:shared:`);
      const tagged = { ttl: 60_000, tags: ['t1', 't2'] };
      expect(await getOrComputeWith(a, 'k', tagged, () => 'a')).toBe('a');
      await vi.waitFor(() => expect(inFlightCount(a)).toBe(0));
      expect((await b.get('k'))?.value).toBe('a');
      await invalidateTag(b, 't2');
      expect(await a.get('k')).toBeUndefined();
      let fills = 0;
      const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 5_000 };
      const fill = async () => {
        fills++;
        await new Promise((resolve) => setTimeout(resolve, 100));
        return 'filled';
      };
      // Either replica may take the lock: each order once, so each is woken by the other's push.
      for (const order of [
        [a, b],
        [b, a],
      ]) {
        const key = `herd-${order[0] === a ? 'a' : 'b'}-first`;
        const started = Date.now();
        const values = await Promise.all(
          order.flatMap((cache) =>
            Array.from({ length: 5 }, () => getOrComputeWith(cache, key, options, fill)),
          ),
        );
        expect(values).toEqual(Array(10).fill('filled'));
        // Polling alone would take 5 s.
        expect(Date.now() - started).toBeLessThan(2_500);
      }
      expect(fills).toBe(2);
    } finally {
      await a.close();
      prefixed.disconnect();
    }
  });
});

describe('a plain ioredis client connected to one node of the cluster', () => {
  // MOVED for every key whose slot lives on another node: those keys were never cached, seen only
  // as backend-error events.
  it('gets one warning naming MOVED; a Cluster client on the same keys gets none', async () => {
    const { server, client } = await cluster();
    const node = server.nodes[0];
    if (node === undefined) throw new Error('no node');
    const plain = new Redis({ host: node.host, port: node.port });
    const warnings: string[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'warning') warnings.push(`${event.cache}: ${event.message}`);
    });
    try {
      const misconnected = cacheOn(plain as unknown as Cluster, `${prefix}moved:`);
      const options = { ttl: 60_000, distributedFillLock: true };
      for (let i = 0; i < 6; i++) await getOrComputeWith(misconnected, `key-${i}`, options, () => i);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(
        /Redis answered MOVED \d+ [\d.]+:\d+ to cache 'redis'.*not a Cluster client/,
      );
      await misconnected.close();
      warnings.length = 0;
      const right = cacheOn(client, `${prefix}moved:`);
      for (let i = 0; i < 6; i++) await getOrComputeWith(right, `key-${i}`, options, () => i);
      expect(warnings).toEqual([]);
    } finally {
      stop();
      plain.disconnect();
    }
  });
});

describe("a Cluster client with scaleReads other than 'master'", () => {
  // GETs go to replicas: a read may be a replication lag behind a delete or a tag invalidation.
  it('gets one warning as the cache is made; the default client, or a prefix that pins a slot, none', async () => {
    const { server, client } = await cluster();
    const replicas = new Cluster([...server.nodes], { scaleReads: 'slave' });
    const warnings: string[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'warning') warnings.push(event.message);
    });
    try {
      const scaled = createRedisCache({ client: replicas, prefix: `${prefix}scaled:`, name: 'scaled' });
      await scaled.close();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/cache 'scaled' has scaleReads 'slave': it reads entries from replicas/);
      const plain = createRedisCache({ client, prefix: `${prefix}scaled:`, name: 'not-scaled' });
      await plain.close();
      // A prefix that pins one slot reads by script, on the primaries.
      const pinned = createRedisCache({ client: replicas, prefix: `${prefix}{scaled}:`, name: 'pinned' });
      await pinned.close();
      expect(warnings).toHaveLength(1);
    } finally {
      stop();
      replicas.disconnect();
    }
  });
});
