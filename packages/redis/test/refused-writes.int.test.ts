import { type BackendErrorEvent, getOrComputeWith, onStampedeEvent, type WarningEvent } from '@stampede/core';
import { type RedisServer, randomPrefix, startRedisServer, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';

// A Redis that refuses every write: `noeviction`, holding 3 MB when its `maxmemory` is set to 2 MB
// (a server of its own). Reads still answer, so each call misses and runs its fill, and each
// refused write is only a `backend-error` event: the key is never cached, silently, on every replica.
let full: RedisServer;
let filler: Redis;
const clients: Redis[] = [];
const caches: RedisCache[] = [];
const warnings: WarningEvent[] = [];
const writeFaults: BackendErrorEvent[] = [];
let stopListening: () => void = () => {};

beforeAll(async () => {
  full = await startRedisServer(['--maxmemory-policy', 'noeviction']);
  filler = new Redis(full.url);
  const chunk = 'x'.repeat(16_384);
  for (let i = 0; i < 192; i++) await filler.set(`filler:${i}`, chunk);
  // Well over the limit: every write is refused (OOM command not allowed when used memory > 'maxmemory').
  await filler.config('SET', 'maxmemory', '2mb');
  await expect(filler.set('probe', '1')).rejects.toThrow(/^OOM /);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'warning') warnings.push(event);
    if (event.type === 'backend-error' && event.operation === 'set') writeFaults.push(event);
  });
});

afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  filler?.disconnect();
  await full?.stop();
});

const warningsOf = (name: string) => warnings.filter((warning) => warning.cache === name);

function cacheOn(url: string, name: string, options: { enableOfflineQueue?: boolean } = {}): RedisCache {
  const client = new Redis(url, { ...options, maxRetriesPerRequest: 0 });
  client.on('error', () => {});
  clients.push(client);
  const cache = createRedisCache({ client, name, prefix: randomPrefix('refused') });
  caches.push(cache);
  return cache;
}

/** `calls` calls of `key` one after another, each write refused before the next call; how many filled. */
async function callsOf(cache: RedisCache, key: string, calls: number, lock: boolean): Promise<number> {
  let fills = 0;
  for (let i = 0; i < calls; i++) {
    const faults = writeFaults.length;
    const value = await getOrComputeWith(cache, key, { ttl: '1m', distributedFillLock: lock }, () => {
      fills++;
      return { n: i };
    });
    expect(value).toEqual({ n: i });
    // The write goes out after the caller has its value; until it has failed, the fill's flight
    // answers the next call.
    await vi.waitFor(() => expect(writeFaults.length).toBe(faults + 1));
  }
  return fills;
}

describe('writes a full noeviction Redis refuses (OOM)', () => {
  it('three refused writes of one key in a row: one warning naming the key and the reply (write alone)', async () => {
    const cache = cacheOn(full.url, 'refused-plain');
    expect(await callsOf(cache, 'hot', 2, false)).toBe(2);
    expect(warningsOf('refused-plain')).toEqual([]);
    expect(await callsOf(cache, 'hot', 1, false)).toBe(1);
    expect(warningsOf('refused-plain')).toHaveLength(1);
    const message = warningsOf('refused-plain')[0]?.message ?? '';
    expect(message).toMatch(
      /refused 3 writes in a row of 'hot' in cache 'refused-plain' \(OOM command not allowed/,
    );
    expect(message).toMatch(/every call for it runs the fill again/);
    // Once for the cache's life.
    expect(await callsOf(cache, 'hot', 4, false)).toBe(4);
    expect(warningsOf('refused-plain')).toHaveLength(1);
  });

  it('the same with the fill lock (the write committed with the release, after a refused lock)', async () => {
    const cache = cacheOn(full.url, 'refused-locked');
    expect(await callsOf(cache, 'hot', 3, true)).toBe(3);
    expect(warningsOf('refused-locked')).toHaveLength(1);
    expect(warningsOf('refused-locked')[0]?.message).toMatch(/'hot'.*OOM/);
  });

  it('refused writes of different keys are no streak', async () => {
    const cache = cacheOn(full.url, 'refused-spread');
    for (const key of ['a', 'b', 'a', 'b', 'c']) await callsOf(cache, key, 1, false);
    expect(warningsOf('refused-spread')).toEqual([]);
  });
});

describe('writes that fail without a refusal', () => {
  it('a Redis that is not there: writes fail (no connection), no warning', async () => {
    const gone = await startRedisServer();
    const url = gone.url;
    await gone.stop();
    const cache = cacheOn(url, 'refused-none', { enableOfflineQueue: false });
    let fills = 0;
    for (let i = 0; i < 5; i++) {
      const faults = writeFaults.length;
      await getOrComputeWith(cache, 'hot', { ttl: '1m' }, () => {
        fills++;
        return i;
      });
      // Until its write has failed, the fill's flight answers the next call.
      await vi.waitFor(() => expect(writeFaults.length).toBe(faults + 1));
    }
    expect(fills).toBe(5);
    expect(warningsOf('refused-none')).toEqual([]);
  });
});

describe('values the serializer cannot carry', () => {
  it('a fill that returns a BigInt three times in a row: one warning naming the key and the cause', async () => {
    const cache = cacheOn((await testRedis()).url, 'unserialisable');
    for (let i = 0; i < 3; i++) {
      const faults = writeFaults.length;
      // The callers get the value as it is; the write is refused before it is sent.
      expect(await getOrComputeWith(cache, 'row', { ttl: '1m' }, () => ({ id: BigInt(i) }))).toEqual({
        id: BigInt(i),
      });
      await vi.waitFor(() => expect(writeFaults.length).toBe(faults + 1));
      expect(writeFaults.at(-1)?.error).toMatchObject({ code: 'E_STAMPEDE_BACKEND_ENCODE' });
    }
    const warned = warningsOf('unserialisable');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.message).toMatch(
      /3 values in a row of 'row' in cache 'unserialisable' could not be serialised \(.*BigInt/,
    );
    // A value it carries is stored as usual.
    await getOrComputeWith(cache, 'row', { ttl: '1m' }, () => ({ id: 1 }));
    await vi.waitFor(async () => expect((await cache.get('row'))?.value).toEqual({ id: 1 }));
  });
});

describe('entries that never decode', () => {
  it("a serializer whose parse does not undo its stringify: one warning after 3 undecodable reads of a key; other keys' good reads are no end of it", async () => {
    const client = new Redis((await testRedis()).url);
    clients.push(client);
    // Reads back what it wrote for `plain`, throws for objects: a serializer that is not its own inverse.
    const serializer = {
      stringify: (value: unknown) => JSON.stringify(value),
      parse: (text: string) => {
        if (text.startsWith('{')) throw new Error('not a value this parse knows');
        return JSON.parse(text) as unknown;
      },
    };
    const cache = createRedisCache({
      client,
      name: 'undecodable',
      prefix: randomPrefix('undecodable'),
      serializer,
    });
    caches.push(cache);
    let fills = 0;
    for (let i = 0; i < 4; i++) {
      // Each read of 'row' is a miss (its entry cannot be decoded) and fills; the write lands before the next.
      expect(
        await getOrComputeWith(cache, 'row', { ttl: '1m' }, () => {
          fills++;
          return { n: i };
        }),
      ).toEqual({ n: i });
      await vi.waitFor(async () => expect(await client.exists(`${cache.prefix}{row}`)).toBe(1));
      expect(await getOrComputeWith(cache, 'plain', { ttl: '1m' }, () => 'text')).toBe('text');
    }
    expect(fills).toBe(4);
    const warned = warningsOf('undecodable');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.message).toMatch(
      /the entry of 'row' in cache 'undecodable' could not be decoded 3 reads in a row \(not a value this parse knows\)/,
    );
  });

  it('an entry that decodes ends the streak: foreign text written twice between good entries gives no warning', async () => {
    const client = new Redis((await testRedis()).url);
    clients.push(client);
    const cache = createRedisCache({
      client,
      name: 'undecodable-ended',
      prefix: randomPrefix('undecodable'),
    });
    caches.push(cache);
    const key = `${cache.prefix}{k}`;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 2; i++) {
        await client.set(key, 'written by another program');
        expect(await cache.get('k')).toBeUndefined();
      }
      await cache.set(
        'k',
        {
          value: round,
          createdAt: Date.now(),
          freshUntil: Date.now() + 60_000,
          staleUntil: Date.now() + 60_000,
        },
        { ttl: 60_000 },
      );
      expect((await cache.get('k'))?.value).toBe(round);
    }
    expect(warningsOf('undecodable-ended')).toEqual([]);
  });
});

describe('a client the application also uses for its own pub/sub (subscriber mode)', () => {
  it('gets one warning: it can run no other command, so nothing is read or stored', async () => {
    const client = new Redis((await testRedis()).url);
    clients.push(client);
    await client.subscribe(`${randomPrefix('app-channel')}events`);
    const cache = createRedisCache({
      client,
      name: 'subscriber-mode',
      prefix: randomPrefix('subscriber-mode'),
    });
    caches.push(cache);
    for (let i = 0; i < 3; i++) {
      expect(await getOrComputeWith(cache, `k${i}`, { ttl: '1m', distributedFillLock: true }, () => i)).toBe(
        i,
      );
    }
    const warned = warningsOf('subscriber-mode');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.message).toMatch(/is in subscriber mode .*client\.duplicate\(\)/);
  });
});
