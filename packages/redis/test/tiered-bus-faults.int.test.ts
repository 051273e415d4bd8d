// Two tiered caches (memory in front of Redis), each with its own client and so its own subscriber
// connection, on a private redis-server: the test kills one replica's subscriber and keeps it from
// reconnecting (maxclients), which it must never do to a server others use.
import {
  createTieredCache,
  getOrComputeWith,
  invalidate,
  invalidateTag,
  onStampedeEvent,
  setValue,
  statsByCache,
  type TieredCache,
  whenIdle,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { deferred, delay, randomPrefix, startRedisServer, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';

interface Replica {
  readonly name: string;
  readonly connectionName: string;
  readonly client: Redis;
  readonly remote: RedisCache;
  readonly cache: TieredCache;
}

let server: Awaited<ReturnType<typeof startRedisServer>>;
let admin: Redis;
const replicas: Replica[] = [];
const prefix = randomPrefix('redis-tiered-bus-faults');

function replica(label: string): Replica {
  const name = `tbf-${label}-${Math.random().toString(36).slice(2, 8)}`;
  // The subscriber connection is a duplicate of the client: it carries the same name.
  const connectionName = `${name}-conn`;
  const client = new Redis(server.url, { connectionName, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  const remote = createRedisCache({ client, prefix, name: `${name}-remote`, operationTimeout: 500 });
  const cache = createTieredCache({ local: createMemoryCache({ name: `${name}-l1` }), remote, name });
  const made = { name, connectionName, client, remote, cache };
  replicas.push(made);
  return made;
}

const counters = (who: Replica) => statsByCache()[who.name];

/** Both listen: each one's setValue evicts the other's copy. */
async function listening(a: Replica, b: Replica): Promise<void> {
  await waitFor(
    async () => {
      await setValue(a.cache, 'probe', 'a', { ttl: 600_000 });
      await setValue(b.cache, 'probe', 'b', { ttl: 600_000 });
      return (counters(a)?.busEvictions ?? 0) > 0 && (counters(b)?.busEvictions ?? 0) > 0;
    },
    { message: 'both replicas to hear each other on the bus' },
  );
}

/**
 * Kills `who`'s subscriber connection and keeps it from coming back (the server is held at
 * maxclients) until the returned function is called.
 */
async function cutBus(who: Replica): Promise<() => Promise<void>> {
  const list = (await admin.call('CLIENT', 'LIST')) as string;
  const lines = list
    .split('\n')
    .filter((line) => line.includes(` name=${who.connectionName} `) && / sub=[1-9]/.test(line));
  expect(lines).toHaveLength(1);
  const id = /(?:^| )id=(\d+)/.exec(lines[0] as string)?.[1] as string;
  const connected = Number(/connected_clients:(\d+)/.exec(await admin.info('clients'))?.[1]);
  await admin.config('SET', 'maxclients', String(connected - 1));
  expect(await admin.call('CLIENT', 'KILL', 'ID', id)).toBe(1);
  return async () => {
    await admin.config('SET', 'maxclients', '10000');
  };
}

/** Resolves on `who`'s next bus-recovery event. */
function recovery(who: Replica): Promise<void> {
  return new Promise((resolve) => {
    const off = onStampedeEvent((event) => {
      if (event.type === 'bus-recovery' && event.cache === who.name) {
        off();
        resolve();
      }
    });
  });
}

beforeEach(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
});
afterEach(async () => {
  await admin.config('SET', 'maxclients', '10000').catch(() => {});
  for (const { cache, remote, client } of replicas.splice(0)) {
    await cache.close({ timeout: 1_000 });
    await remote.close();
    client.disconnect();
  }
  admin.disconnect();
  await server.stop();
});

describe('a tiered replica whose bus subscriber is killed and kept down (its data connection works)', () => {
  it("serves no L1 copy from the moment it notices: another replica's invalidateTag, invalidate and setValue hold throughout", async () => {
    const [a, b] = [replica('a'), replica('b')];
    await listening(a, b);
    const tagged = (kind: string) => ({ ttl: 600_000, tags: [`tag-${kind}`] });
    const kinds = ['tag', 'inv', 'set'] as const;
    for (const kind of kinds) {
      await setValue(a.cache, `key-${kind}`, 'old', tagged(kind));
      expect(await getOrComputeWith(b.cache, `key-${kind}`, tagged(kind), () => 'unused')).toBe('old');
    }
    const l1Before = counters(b)?.l1Hits ?? 0;
    expect(await getOrComputeWith(b.cache, 'key-tag', tagged('tag'), () => 'unused')).toBe('old');
    expect(counters(b)?.l1Hits).toBe(l1Before + 1); // B holds its copies in L1

    await setValue(a.cache, 'notice', 'n', { ttl: 600_000 });
    expect(await getOrComputeWith(b.cache, 'notice', { ttl: 600_000 }, () => 'unused')).toBe('n');
    const restore = await cutBus(b);
    const killedAt = performance.now();
    // The window this cannot close: until the client notices the connection closed, B serves L1.
    // It has noticed once a read of a key it holds in L1 is answered by L2.
    await waitFor(
      async () => {
        const l2 = counters(b)?.l2Hits ?? 0;
        await getOrComputeWith(b.cache, 'notice', { ttl: 600_000 }, () => 'unused');
        return (counters(b)?.l2Hits ?? 0) > l2;
      },
      { message: 'B to notice its bus is lost', timeout: 2_000 },
    );
    const noticedMs = performance.now() - killedAt;
    expect(noticedMs).toBeLessThan(1_000);

    await invalidateTag(a.cache, 'tag-tag');
    await invalidate(a.cache, 'key-inv');
    await setValue(a.cache, 'key-set', 'new', tagged('set'));
    const old: string[] = [];
    const until = performance.now() + 1_000; // the bus stays down meanwhile
    while (performance.now() < until) {
      for (const kind of kinds) {
        const served = await getOrComputeWith(b.cache, `key-${kind}`, tagged(kind), () => 'new');
        if (served === 'old') old.push(kind);
      }
      await delay(50);
    }
    expect(old).toEqual([]);
    expect(counters(b)?.busRecoveries).toBe(0); // it was down all along

    // Back: L1 cleared, and L1 hits (on the core's hit path) resume.
    const back = recovery(b);
    await restore();
    await back;
    expect(await getOrComputeWith(b.cache, 'key-set', tagged('set'), () => 'unused')).toBe('new');
    const l1 = counters(b)?.l1Hits ?? 0;
    expect(await getOrComputeWith(b.cache, 'key-set', tagged('set'), () => 'unused')).toBe('new');
    expect(counters(b)?.l1Hits).toBe(l1 + 1);
  });
});

describe('a fill on a tiered replica that spans its bus reconnection', () => {
  it.each([
    { lock: false, label: 'without the fill lock' },
    { lock: true, label: 'with distributedFillLock (the write is the lock commit)' },
  ])('$label: its value, from before a tag invalidation it missed, is not kept in L1', async ({ lock }) => {
    const [a, b] = [replica('a'), replica('b')];
    await listening(a, b);
    const options = { ttl: 600_000, tags: ['catalog'], distributedFillLock: lock };
    const source = deferred<string>();
    const started = deferred<void>();
    const slow = getOrComputeWith(b.cache, 'k', options, () => {
      started.resolve();
      return source.promise;
    });
    await started.promise;
    const restore = await cutBus(b);
    await delay(20);
    await invalidateTag(a.cache, 'catalog'); // B does not hear it
    const back = recovery(b);
    await restore();
    await back; // B's L1 is cleared now
    source.resolve('old'); // read from the source before the invalidation
    expect(await slow).toBe('old'); // its caller came before the invalidation
    expect(await whenIdle(b.cache, { timeout: '2s' })).toBe(true); // its write has landed
    const reads: string[] = [];
    for (let i = 0; i < 5; i++) reads.push(await getOrComputeWith(b.cache, 'k', options, () => 'new'));
    expect(reads).toEqual(['new', 'new', 'new', 'new', 'new']);
    expect(await getOrComputeWith(a.cache, 'k', options, () => 'unused')).toBe('new');
  });
});
