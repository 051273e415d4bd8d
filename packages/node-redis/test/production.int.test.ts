import { createTieredCache, getOrComputeWith, onStampedeEvent, type WarningEvent } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import {
  freePort,
  type RedisServer,
  randomPrefix,
  readsTimingOut,
  spawnRedisServer,
  startRedisCluster,
  startRedisServer,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeRedisCache, type NodeRedisCache } from '../src/index.js';

// node-redis against servers of its own: values on one that evicts, locks on one that does not.
let values: RedisServer;
let locks: RedisServer;
const observers: Redis[] = [];
const closers: (() => unknown)[] = [];
const warnings: WarningEvent[] = [];
let stopListening: () => void = () => {};

beforeAll(async () => {
  [values, locks] = await Promise.all([
    startRedisServer(['--maxmemory', '2mb', '--maxmemory-policy', 'allkeys-lru']),
    startRedisServer(['--maxmemory-policy', 'noeviction']),
  ]);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'warning') warnings.push(event);
  });
});

afterAll(async () => {
  stopListening();
  for (const close of closers.reverse()) await close();
  for (const observer of observers) observer.disconnect();
  await Promise.all([values?.stop(), locks?.stop()]);
});

async function connected(url: string) {
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  closers.push(() => client.destroy());
  return client;
}

function observe(url: string): Redis {
  const observer = new Redis(url);
  observers.push(observer);
  return observer;
}

describe('node-redis in production', () => {
  it('with lockClient: values on one server, locks and announcements on the other; scripts loaded as it is created', async () => {
    const [valuesAdmin, locksAdmin] = [observe(values.url), observe(locks.url)];
    await Promise.all([valuesAdmin.script('FLUSH'), locksAdmin.script('FLUSH')]);
    await Promise.all([valuesAdmin.config('RESETSTAT'), locksAdmin.config('RESETSTAT')]);
    const prefix = randomPrefix('nr-split');
    const replicas: NodeRedisCache[] = [];
    for (const name of ['nr-split-a', 'nr-split-b']) {
      const cache = createNodeRedisCache({
        client: await connected(values.url),
        lockClient: await connected(locks.url),
        name,
        prefix,
      });
      closers.push(() => cache.close());
      replicas.push(cache);
    }
    let fills = 0;
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 5_000 };
    const started = performance.now();
    const answers = await Promise.all(
      replicas.flatMap((cache) =>
        Array.from({ length: 10 }, () =>
          getOrComputeWith(cache, 'k', options, async () => {
            fills++;
            await new Promise((resolve) => setTimeout(resolve, 200));
            return 'v';
          }),
        ),
      ),
    );
    const slowest = performance.now() - started;
    expect(answers.every((answer) => answer === 'v')).toBe(true);
    expect(fills).toBe(1);
    // Woken by the announcement on the lock server, not by the 5 s poll.
    expect(slowest).toBeLessThan(2_000);
    const [valueStats, lockStats] = await Promise.all([
      valuesAdmin.info('commandstats'),
      locksAdmin.info('commandstats'),
    ]);
    // Locks were taken (SET NX), released and announced on the lock server only: the value server
    // ran one SET, the write script's. No script fell back to EVAL on either.
    expect(lockStats).toMatch(/cmdstat_set:calls=\d+/);
    expect(lockStats).toMatch(/cmdstat_publish:calls=\d+/);
    expect(lockStats).toMatch(/cmdstat_subscribe:calls=\d+/);
    expect(valueStats).toMatch(/cmdstat_set:calls=1,/);
    expect(valueStats).not.toMatch(/cmdstat_publish:/);
    expect(valueStats).not.toMatch(/cmdstat_eval:/);
    expect(lockStats).not.toMatch(/cmdstat_eval:/);
    expect(lockStats).toMatch(/cmdstat_script\|load:calls=\d+/);
    expect(await valuesAdmin.keys(`${prefix}*`)).toEqual([`${prefix}{k}`]);
    // The evicting server holds no lock, but it holds the tombstones and tags' records: one warning
    // per cache, of invalidations only (before: none).
    for (const name of ['nr-split-a', 'nr-split-b']) {
      const found = warnings.filter((warning) => warning.cache === name);
      expect(found).toHaveLength(1);
      expect(found[0]?.message).toMatch(
        /Redis holding the values of cache 'nr-split-.' has maxmemory-policy allkeys-lru.*tag's invalidation record.*tombstone/,
      );
      expect(found[0]?.message).not.toMatch(/fill lock/);
    }
  });

  it('warns once when the lock server can evict', async () => {
    const cache = createNodeRedisCache({ client: await connected(values.url), name: 'nr-evicting' });
    closers.push(() => cache.close());
    const found = () => warnings.filter((warning) => warning.cache === 'nr-evicting');
    await waitFor(() => found().length > 0, { timeout: 2_000, message: 'the eviction warning' });
    // Used afterwards: still one.
    await cache.set(
      'k',
      { value: 1, createdAt: Date.now(), freshUntil: Infinity, staleUntil: Infinity },
      { ttl: 1_000 },
    );
    await cache.get('k');
    expect(found()).toHaveLength(1);
    expect(found()[0]?.message).toMatch(/allkeys-lru/);
  });
});

describe('node-redis on a Redis that refuses writes', () => {
  it('a full noeviction Redis (OOM): after three refused writes of one key, one warning naming it', async () => {
    const full = await startRedisServer(['--maxmemory-policy', 'noeviction']);
    closers.push(() => full.stop());
    const admin = observe(full.url);
    const chunk = 'x'.repeat(16_384);
    for (let i = 0; i < 192; i++) await admin.set(`filler:${i}`, chunk);
    await admin.config('SET', 'maxmemory', '2mb');
    const faults: unknown[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'backend-error' && event.operation === 'set') faults.push(event.error);
    });
    try {
      const cache = createNodeRedisCache({
        client: await connected(full.url),
        name: 'nr-refused',
        prefix: randomPrefix('nr-refused'),
      });
      closers.push(() => cache.close());
      for (let i = 0; i < 3; i++) {
        const before = faults.length;
        expect(await getOrComputeWith(cache, 'hot', { ttl: '1m' }, () => i)).toBe(i);
        // Until its write has failed, the fill's flight answers the next call.
        await waitFor(() => faults.length > before, { message: 'the write to fail' });
      }
      const warned = warnings.filter((warning) => warning.cache === 'nr-refused');
      expect(warned).toHaveLength(1);
      expect(warned[0]?.message).toMatch(/refused 3 writes in a row of 'hot' in cache 'nr-refused' \(OOM /);
    } finally {
      stop();
    }
  });
});

describe('node-redis as a user without channels (the default for a new user on Redis 7)', () => {
  it('the refused SUBSCRIBE gets one warning; the lock still holds a herd to one fill', async () => {
    const admin = observe(locks.url);
    await admin.call('ACL', 'SETUSER', 'nr-nochannels', 'on', '>pw', '~*', 'resetchannels', '+@all');
    const replicas: NodeRedisCache[] = [];
    const prefix = randomPrefix('nr-nochannels');
    for (const name of ['nr-nochannels-a', 'nr-nochannels-b']) {
      const cache = createNodeRedisCache({
        client: await connected(locks.url.replace('redis://', 'redis://nr-nochannels:pw@')),
        name,
        prefix,
      });
      closers.push(() => cache.close());
      replicas.push(cache);
    }
    const names = replicas.map((cache) => cache.name);
    let fills = 0;
    await Promise.all(
      replicas.flatMap((cache) =>
        Array.from({ length: 10 }, () =>
          getOrComputeWith(cache, 'herd', { ttl: 60_000, distributedFillLock: true }, async () => {
            fills++;
            await new Promise((resolve) => setTimeout(resolve, 100));
            return 1;
          }),
        ),
      ),
    );
    expect(fills).toBe(1);
    // The replica that lost the lock subscribed to the holder's announcement (refused): one warning,
    // for that cache; the holder never waited.
    const refused = () =>
      warnings.filter(
        (warning) => names.includes(warning.cache) && /refused to SUBSCRIBE/.test(warning.message),
      );
    await waitFor(() => refused().length > 0, { message: 'the SUBSCRIBE warning' });
    expect(refused()).toHaveLength(1);
    expect(refused()[0]?.message).toMatch(/NOPERM.*they poll/);
  });
});

describe('node-redis as a user without UNSUBSCRIBE', () => {
  it('closing a tiered cache (which leaves the bus) gives no SUBSCRIBE warning: nothing stopped hearing', async () => {
    // Before: the refused UNSUBSCRIBE was reported as a refused SUBSCRIBE ("Lock waiters are not woken").
    const admin = observe(locks.url);
    await admin.call('ACL', 'SETUSER', 'nr-nounsubscribe', 'on', '>pw', '~*', '&*', '+@all', '-unsubscribe');
    const remote = createNodeRedisCache({
      client: await connected(locks.url.replace('redis://', 'redis://nr-nounsubscribe:pw@')),
      name: 'nr-nounsubscribe',
      prefix: randomPrefix('nr-nounsubscribe'),
    });
    closers.push(() => remote.close());
    const errors: unknown[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'backend-error' && event.cache === remote.name) errors.push(event.error);
    });
    try {
      const tiered = createTieredCache({
        local: createMemoryCache(),
        remote,
        name: 'nr-nounsubscribe-tiered',
      });
      expect(await getOrComputeWith(tiered, 'k', { ttl: 60_000 }, () => 1)).toBe(1);
      await tiered.close();
      // The UNSUBSCRIBE was answered (refused): a fault, counted.
      await waitFor(() => errors.length > 0, { message: 'the refused UNSUBSCRIBE' });
      expect(String(errors[0])).toMatch(/unsubscribe/i);
      expect(warnings.filter((warning) => warning.cache === remote.name)).toEqual([]);
    } finally {
      off();
    }
  });
});

describe('a node-redis client connected to one node of a Redis Cluster', () => {
  // MOVED for every key whose slot lives on another node: those keys were never cached, seen only
  // as backend-error events.
  it('gets one warning naming MOVED and the fix', async () => {
    const cluster = await startRedisCluster(3);
    try {
      const node = cluster.nodes[0];
      if (node === undefined) throw new Error('no node');
      const cache = createNodeRedisCache({
        client: await connected(`redis://${node.host}:${node.port}`),
        name: 'nr-moved',
        prefix: randomPrefix('nr-moved'),
      });
      closers.push(() => cache.close());
      for (let i = 0; i < 6; i++) {
        await getOrComputeWith(cache, `key-${i}`, { ttl: 60_000, distributedFillLock: true }, () => i);
      }
      const mine = warnings.filter((warning) => warning.cache === 'nr-moved');
      expect(mine).toHaveLength(1);
      expect(mine[0]?.message).toMatch(
        /Redis answered MOVED \d+ [\d.]+:\d+ to cache 'nr-moved'.*ioredis Cluster/,
      );
      await cache.close();
    } finally {
      await cluster.stop();
    }
  });
});

describe('node-redis reads that waited out an outage', () => {
  it('do not count as slow reads: no warning blames the value', async () => {
    // A server of this test's own, stopped while reads are sent: they wait in node-redis's offline
    // queue and answer after operationTimeout once it is back. Their lateness is the outage's.
    const port = await freePort();
    let server = await spawnRedisServer(port);
    const client = createClient({ url: server.url, socket: { reconnectStrategy: () => 20 } });
    client.on('error', () => {});
    await client.connect();
    const name = 'nr-outage-reader';
    const cache = createNodeRedisCache({
      client,
      prefix: randomPrefix('nr-outage'),
      name,
      operationTimeout: 20,
    });
    const entry = { value: 'v', createdAt: Date.now(), freshUntil: Infinity, staleUntil: Infinity };
    try {
      await cache.set('small', entry, { ttl: 60_000 });
      await server.stop();
      await waitFor(() => !client.isReady);
      const lateAnswers = await readsTimingOut(() => cache.get('small'), 4);
      server = await spawnRedisServer(port);
      await waitFor(() => client.isReady, { timeout: 10_000 });
      // Every queued read has had its late answer.
      await client.ping();
      await new Promise((resolve) => setImmediate(resolve));
      await lateAnswers;
      expect(warnings.filter((warning) => warning.cache === name)).toEqual([]);
    } finally {
      await cache.close();
      client.destroy();
      await server.stop();
    }
  });
});
