import { createHash } from 'node:crypto';
import type { CacheEntry, FillAnnouncement, FillOutcome } from '@stampede/core';
import { getOrComputeWith, inFlightCount, resetStats, statsByCache } from '@stampede/core';
import {
  ANNOUNCED_VALUE_LIMIT,
  COMMIT_SCRIPT,
  GET_SCRIPT,
  LOCK_AND_READ_SCRIPT,
  type LuaScript,
  RELEASE_SCRIPT,
  TIME_SCRIPT,
  WRITE_SCRIPT,
} from '@stampede/redis-protocol';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { LINGERING_CHANNELS } from '../src/notifier.js';
import { deletePrefix } from './helpers.js';

// Round trips of a locked miss, counted as the commands each cache's own client sends (the
// subscriber connection it duplicates is not counted: it carries no request of a call). A holder's
// miss: read, lock-and-read, commit. A loser woken by push: read, lock-and-read, and the
// announcement carries the value. Scripts are named by their SHA-1; the server clock's background
// re-measurement (TIME) is left out, as it belongs to no call.

const SCRIPT_NAMES = new Map(
  (
    [
      [GET_SCRIPT, 'read'],
      [LOCK_AND_READ_SCRIPT, 'lock-and-read'],
      [COMMIT_SCRIPT, 'commit'],
      [RELEASE_SCRIPT, 'release'],
      [WRITE_SCRIPT, 'write'],
      [TIME_SCRIPT, 'time'],
    ] as [LuaScript, string][]
  ).map(([script, name]) => [createHash('sha1').update(script.source).digest('hex'), name]),
);

const prefix = randomPrefix('redis-round-trips');
const clients: Redis[] = [];
const caches: RedisCache[] = [];
const LOCKED = { ttl: '1m', distributedFillLock: true, lockPollInterval: 2_000 } as const;

interface Replica {
  readonly cache: RedisCache;
  readonly client: Redis;
  /** The names of the commands the client sent since the last `reset`. */
  readonly sent: string[];
  reset(): void;
}

async function replica(name: string, options: { lockClient?: Redis } = {}): Promise<Replica> {
  // One client per cache, as two replicas would have; its subscriber inherits the connection name.
  const client = new Redis((await testRedis()).url, {
    connectionName: `${prefix}${name}`.replace(/\W/g, '-'),
  });
  clients.push(client);
  const sent: string[] = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((command: { name: string; args: unknown[] }, stream?: unknown) => {
    const name =
      command.name === 'evalsha' ? (SCRIPT_NAMES.get(String(command.args[0])) ?? 'evalsha') : command.name;
    if (name !== 'time') sent.push(name);
    return send(command as never, stream as never);
  }) as typeof client.sendCommand;
  const cache = createRedisCache({ client, prefix, name, ...options });
  caches.push(cache);
  // The warm-up (SCRIPT LOAD, the clock, CONFIG GET) is answered once a later command is.
  await client.ping();
  return {
    cache,
    client,
    sent,
    reset() {
      sent.length = 0;
    },
  };
}

/** Resolves once `cache`'s subscriber hears `key` (its channel subscribed and acknowledged). */
async function listenedBefore(cache: RedisCache, key: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const stop = cache.onFillDone(
      key,
      () => {},
      () => {
        stop();
        resolve();
      },
    );
  });
  await vi.waitFor(() => expect(cache.hearsFillDone(key)).toBe(true));
}

/** The messages published on `key`'s channel, heard by a raw subscriber of the test's own. */
async function channelWatch(key: string): Promise<{ messages: string[]; stop(): void }> {
  const subscriber = new Redis((await testRedis()).url);
  clients.push(subscriber);
  const messages: string[] = [];
  subscriber.on('message', (_channel: string, message: string) => messages.push(message));
  await subscriber.subscribe(redisKeys(prefix, key).channel);
  return { messages, stop: () => subscriber.disconnect() };
}

function entry(value: unknown, createdAt = Date.now()): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + 60_000, staleUntil: createdAt + 60_000 };
}

beforeEach(() => resetStats());

afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  const first = clients[0];
  if (first !== undefined) await deletePrefix(first, prefix);
  for (const client of clients) client.disconnect();
  await (await testRedis()).stop();
});

describe('round trips of a locked miss', () => {
  it("a holder's miss sends 3 commands: the read, the lock-and-read script, the commit script", async () => {
    const holder = await replica('rt-holder');
    for (const key of ['cold-1', 'cold-2', 'cold-3']) {
      holder.reset();
      expect(await getOrComputeWith(holder.cache, key, LOCKED, () => ({ key }))).toEqual({ key });
      await vi.waitFor(() => expect(inFlightCount(holder.cache)).toBe(0));
      expect(holder.sent).toEqual(['read', 'lock-and-read', 'commit']);
    }
    expect(statsByCache()['rt-holder']).toMatchObject({ fills: 3, lockAcquired: 3, lockWaitHits: 0 });
    // Stored and released: another replica hits, and takes the lock at once.
    const other = await replica('rt-holder-other');
    expect(await other.cache.get('cold-1')).toMatchObject({ value: { key: 'cold-1' } });
    const lock = await other.cache.tryAcquireFillLock?.('cold-1', 5_000);
    expect(lock).toBeDefined();
    await lock?.release('failed');
  });

  it("the double-check: another replica's value found by the lock script is served, no fill, no extra read", async () => {
    const holder = await replica('rt-double');
    const writer = await replica('rt-double-writer');
    const key = 'double-check';
    // Between this replica's miss and its lock attempt, another replica writes the key.
    const get = holder.cache.get.bind(holder.cache);
    let first = true;
    holder.cache.get = async (readKey) => {
      const found = await get(readKey);
      if (first && readKey === key) {
        first = false;
        await writer.cache.set(key, entry('theirs'), { ttl: 60_000 });
      }
      return found;
    };
    holder.reset();
    const fill = vi.fn(() => 'mine');
    expect(await getOrComputeWith(holder.cache, key, LOCKED, fill)).toBe('theirs');
    expect(fill).not.toHaveBeenCalled();
    // The read, the lock-and-read (which took the free lock and found the value), the release.
    expect(holder.sent).toEqual(['read', 'lock-and-read', 'release']);
    expect(statsByCache()['rt-double']).toMatchObject({ lockAcquired: 1, lockWaitHits: 1, fills: 0 });
    const lock = await writer.cache.tryAcquireFillLock?.(key, 5_000);
    expect(lock, 'the lock was released').toBeDefined();
    await lock?.release('failed');
  });

  it('a loser woken by push on a channel it already hears sends 2 commands and takes the value from the announcement', async () => {
    const holder = await replica('rt-push-holder');
    const loser = await replica('rt-push-loser');
    const key = 'hot';
    // A herd before: the key's channel lingers on the loser's subscriber.
    await listenedBefore(loser.cache, key);
    const loserFill = vi.fn(() => 'loser');
    let loserCall: Promise<unknown> | undefined;
    const held = await getOrComputeWith(holder.cache, key, LOCKED, async () => {
      loser.reset();
      loserCall = getOrComputeWith(loser.cache, key, LOCKED, loserFill);
      // The loser's read and lock attempt are answered while this fill still runs.
      await vi.waitFor(() => expect(statsByCache()['rt-push-loser']?.lockContended).toBe(1));
      return { by: 'holder' };
    });
    expect(held).toEqual({ by: 'holder' });
    expect(await loserCall).toEqual({ by: 'holder' });
    expect(loserFill).not.toHaveBeenCalled();
    expect(loser.sent).toEqual(['read', 'lock-and-read']);
    expect(statsByCache()['rt-push-loser']).toMatchObject({ lockContended: 1, lockWaitHits: 1 });
  });

  it('after its subscriber connection is killed, a lingering channel is not trusted until it is subscribed again', async () => {
    const holder = await replica('rt-killed-holder');
    const loser = await replica('rt-killed-loser');
    const key = 'killed';
    await listenedBefore(loser.cache, key);
    const name = `${prefix}rt-killed-loser`.replace(/\W/g, '-');
    const list = String(await holder.client.call('CLIENT', 'LIST'));
    const line = list
      .split('\n')
      .find((entry) => entry.includes(` name=${name} `) && / sub=[1-9]/.test(entry));
    const id = /(?:^| )id=(\d+)/.exec(line ?? '')?.[1];
    expect(id, 'the subscriber connection').toBeDefined();
    expect(await holder.client.call('CLIENT', 'KILL', 'ID', id as string)).toBe(1);
    await vi.waitFor(() => expect(loser.cache.hearsFillDone(key)).toBe(false));
    // ioredis reconnects and subscribes again; a PING answered after that proves it.
    await vi.waitFor(() => expect(loser.cache.hearsFillDone(key)).toBe(true), { timeout: 5_000 });
    let loserCall: Promise<unknown> | undefined;
    await getOrComputeWith(holder.cache, key, LOCKED, async () => {
      loser.reset();
      loserCall = getOrComputeWith(loser.cache, key, LOCKED, () => 'loser');
      await vi.waitFor(() => expect(statsByCache()['rt-killed-loser']?.lockContended).toBe(1));
      return 'held';
    });
    expect(await loserCall).toBe('held');
    expect(loser.sent).toEqual(['read', 'lock-and-read']);
  });

  it(`at most ${LINGERING_CHANNELS} channels linger; the least recently waited on is unsubscribed first`, async () => {
    const { cache, client } = await replica('rt-lingering');
    const keys = Array.from({ length: LINGERING_CHANNELS + 1 }, (_, i) => `lingering-${i}`);
    for (const key of keys) await listenedBefore(cache, key);
    const [first, second] = keys;
    await vi.waitFor(() => expect(cache.hearsFillDone(first as string)).toBe(false));
    expect(cache.hearsFillDone(second as string)).toBe(true);
    expect(cache.hearsFillDone(keys.at(-1) as string)).toBe(true);
    const channels = (keys: string[]) => keys.map((key) => redisKeys(prefix, key).channel);
    await vi.waitFor(async () => {
      const counts = (await client.call(
        'PUBSUB',
        'NUMSUB',
        ...channels([first as string, second as string]),
      )) as (string | number)[];
      expect(counts.filter((_, i) => i % 2 === 1).map(Number)).toEqual([0, 1]);
    });
  });

  it('a loser on a cold channel keeps the confirming read after its subscription is acknowledged', async () => {
    const holder = await replica('rt-cold-holder');
    const loser = await replica('rt-cold-loser');
    const key = 'cold-channel';
    expect(loser.cache.hearsFillDone(key)).toBe(false);
    const loserFill = vi.fn(() => 'loser');
    let loserCall: Promise<unknown> | undefined;
    await getOrComputeWith(holder.cache, key, LOCKED, async () => {
      loser.reset();
      loserCall = getOrComputeWith(loser.cache, key, LOCKED, loserFill);
      await vi.waitFor(() => expect(statsByCache()['rt-cold-loser']?.lockContended).toBe(1));
      // The confirming read follows the acknowledgement, while this fill still runs.
      await vi.waitFor(() => expect(loser.sent.length).toBe(3));
      return 'held';
    });
    expect(await loserCall).toBe('held');
    expect(loserFill).not.toHaveBeenCalled();
    // Read, lock-and-read, the confirming read; the value then came with the announcement.
    expect(loser.sent).toEqual(['read', 'lock-and-read', 'read']);
    // The channel lingers for the key's next herd.
    expect(loser.cache.hearsFillDone(key)).toBe(true);
  });

  it('an announced value above the size bound is announced bare, and the woken loser reads it', async () => {
    const holder = await replica('rt-big-holder');
    const loser = await replica('rt-big-loser');
    const key = 'big';
    await listenedBefore(loser.cache, key);
    const watch = await channelWatch(key);
    const big = 'x'.repeat(ANNOUNCED_VALUE_LIMIT + 1);
    let loserCall: Promise<unknown> | undefined;
    await getOrComputeWith(holder.cache, key, LOCKED, async () => {
      loser.reset();
      loserCall = getOrComputeWith(loser.cache, key, LOCKED, () => 'loser');
      await vi.waitFor(() => expect(statsByCache()['rt-big-loser']?.lockContended).toBe(1));
      return big;
    });
    expect(await loserCall).toBe(big);
    // Read, lock-and-read, then the read the bare announcement asks for.
    expect(loser.sent).toEqual(['read', 'lock-and-read', 'read']);
    await vi.waitFor(() => expect(watch.messages).toEqual(['filled']));
    watch.stop();
  });

  it('a commit refused by the write guard (a newer entry) still releases and announces the newer entry', async () => {
    const holder = await replica('rt-refused');
    const other = await replica('rt-refused-other');
    const key = 'refused';
    const watch = await channelWatch(key);
    const attempt = await holder.cache.tryAcquireFillLockAndRead?.(key, 5_000);
    const lock = attempt?.lock;
    expect(lock?.commit).toBeDefined();
    const startedAt = Date.now();
    await other.cache.set(key, entry('newer', startedAt + 1_000), { ttl: 60_000 });
    const heard: { outcome: FillOutcome; announced: FillAnnouncement | undefined }[] = [];
    const stop = other.cache.onFillDone(key, (outcome, announced) => heard.push({ outcome, announced }));
    await vi.waitFor(() => expect(other.cache.hearsFillDone(key)).toBe(true));
    expect(await lock?.commit?.(entry('older', startedAt), { ttl: 60_000 })).toBe(false);
    expect(await other.cache.get(key)).toMatchObject({ value: 'newer' });
    const next = await other.cache.tryAcquireFillLock?.(key, 5_000);
    expect(next, 'the refused commit released the lock').toBeDefined();
    await vi.waitFor(() => expect(heard).toHaveLength(1));
    expect(heard[0]?.outcome).toBe('filled');
    expect(heard[0]?.announced?.holder).toBe(attempt?.holder);
    expect(heard[0]?.announced?.entry).toMatchObject({ value: 'newer' });
    expect(watch.messages[0]).toMatch(/^filled\|[0-9a-f]+\|s\d/);
    stop();
    watch.stop();
    await next?.release('failed');
  });

  it("a holder whose lock lapsed still writes (guarded) and does not delete the next holder's lock", async () => {
    const holder = await replica('rt-lapsed');
    const other = await replica('rt-lapsed-other');
    const key = 'lapsed';
    const watch = await channelWatch(key);
    const lapsed = (await holder.cache.tryAcquireFillLockAndRead?.(key, 50))?.lock;
    expect(lapsed).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 150));
    const current = await other.cache.tryAcquireFillLock?.(key, 5_000);
    expect(current).toBeDefined();
    expect(await lapsed?.commit?.(entry('late'), { ttl: 60_000 })).toBe(true);
    expect(await other.cache.get(key)).toMatchObject({ value: 'late' });
    expect(await holder.cache.tryAcquireFillLock?.(key, 5_000), "the other holder's lock stands").toBe(
      undefined,
    );
    await vi.waitFor(() => expect(watch.messages).toHaveLength(1));
    watch.stop();
    await current?.release('failed');
  });

  it('with a separate lock client the lock and the read travel in parallel, and the lock cannot commit', async () => {
    const lockServer = new Redis((await testRedis()).url, { db: 1 });
    clients.push(lockServer);
    const holder = await replica('rt-separate', { lockClient: lockServer });
    const key = 'separate';
    await holder.cache.set(key, entry('there'), { ttl: 60_000 });
    const attempt = await holder.cache.tryAcquireFillLockAndRead?.(key, 5_000);
    expect(attempt?.entry).toMatchObject({ value: 'there' });
    expect(attempt?.lock).toBeDefined();
    expect(attempt?.lock?.commit).toBeUndefined();
    await attempt?.lock?.release('failed');
    const plain = await holder.cache.tryAcquireFillLock?.(key, 5_000);
    expect(plain?.commit).toBeUndefined();
    await plain?.release('failed');
    await deletePrefix(lockServer, prefix);
  });
});
