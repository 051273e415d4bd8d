import type { CacheEntry, FillAnnouncement, FillOutcome } from '@stampede/core';
import { randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// A holder whose lock lapsed (its fill outran lockTtl, or its release kept failing and is retried
// until the lapse) must not announce a fill's end on the key's channel once another holder has
// taken the lock: the waiters then wait for that holder, and the lapsed holder's announcement would
// only wake them to a read (and a lock attempt) for nothing. Before, the release script published
// whether or not it deleted its own lock. Each cache object here is another replica as far as the
// lock goes (its own core state and token); a raw SUBSCRIBE and a waiter's `onFillDone` listener
// watch the channel. Channel messages arrive in publish order, so the new holder's own release,
// published last, tells when everything before it has been heard.

const prefix = randomPrefix('release-announce');
let client: Redis;
let subscriber: Redis;
const caches: RedisCache[] = [];
let count = 0;

function newCache(): RedisCache {
  const cache = createRedisCache({ client, prefix, name: `announce-${count++}` });
  caches.push(cache);
  return cache;
}

/** Every message of `key`'s channel from now on, on a connection of the test's own. */
async function channelOf(key: string): Promise<string[]> {
  const { channel } = redisKeys(prefix, key);
  const messages: string[] = [];
  subscriber.on('message', (from: string, message: string) => {
    if (from === channel) messages.push(message);
  });
  await subscriber.subscribe(channel);
  return messages;
}

/** A waiter's listener on `key` (what the core registers while it waits), once Redis acknowledged it. */
async function waiterOn(cache: RedisCache, key: string) {
  const heard: { outcome: FillOutcome; announced: FillAnnouncement | undefined }[] = [];
  let stop: () => void = () => {};
  await new Promise<void>((ready) => {
    stop = cache.onFillDone(key, (outcome, announced) => heard.push({ outcome, announced }), ready);
  });
  return { heard, stop };
}

/** A lock on `key` of `ttl` ms taken by `cache`, once it has lapsed. */
async function lapsedLock(cache: RedisCache, key: string) {
  const attempt = await cache.tryAcquireFillLockAndRead?.(key, 50);
  expect(attempt?.lock).toBeDefined();
  const { lock } = redisKeys(prefix, key);
  await waitFor(async () => (await client.exists(lock)) === 0, { message: 'the 50 ms lock to lapse' });
  return { lock: attempt?.lock, token: attempt?.holder };
}

/** An entry made `ago` ms before now, fresh for a minute. */
function entryOf(value: string, ago = 0): CacheEntry {
  const createdAt = Date.now() - ago;
  return { value, createdAt, freshUntil: createdAt + 60_000, staleUntil: createdAt + 60_000 };
}

beforeAll(async () => {
  const { url } = await testRedis();
  client = new Redis(url);
  subscriber = new Redis(url);
});
afterAll(async () => {
  await Promise.all(caches.map((cache) => cache.close()));
  subscriber.disconnect();
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe("a lapsed holder's release, once another holder has the lock", () => {
  it("deletes nothing and announces nothing: the new holder's waiter is not woken", async () => {
    const key = 'release';
    const [lapsed, current, waiting] = [newCache(), newCache(), newCache()];
    const old = await lapsedLock(lapsed, key);
    const next = await current.tryAcquireFillLock?.(key, 10_000);
    expect(next).toBeDefined();
    const owner = await client.get(redisKeys(prefix, key).lock);
    const messages = await channelOf(key);
    const waiter = await waiterOn(waiting, key);

    // What a release retried after a fault, or a fill that outran its lock, sends late.
    await old.lock?.release('failed');
    expect(await client.get(redisKeys(prefix, key).lock)).toBe(owner);

    await next?.release('filled');
    await waitFor(() => messages.at(-1) === 'filled' && waiter.heard.at(-1)?.outcome === 'filled', {
      message: "the new holder's announcement",
    });
    expect(messages).toEqual(['filled']);
    expect(waiter.heard.map((each) => each.outcome)).toEqual(['filled']);
    waiter.stop();
  });

  it('a commit whose write is refused (a delete came after its fill started) announces nothing either', async () => {
    const key = 'commit-refused';
    const [lapsed, current, waiting] = [newCache(), newCache(), newCache()];
    const old = await lapsedLock(lapsed, key);
    const next = await current.tryAcquireFillLock?.(key, 10_000);
    expect(next).toBeDefined();
    // A tombstone newer than the lapsed holder's fill: its write is refused.
    await current.delete(key);
    const messages = await channelOf(key);
    const waiter = await waiterOn(waiting, key);

    expect(await old.lock?.commit?.(entryOf('from the lapsed holder', 1_000), { ttl: 60_000 })).toBe(false);

    await next?.release('failed');
    await waitFor(() => messages.at(-1) === 'failed' && waiter.heard.at(-1)?.outcome === 'failed', {
      message: "the new holder's announcement",
    });
    expect(messages).toEqual(['failed']);
    expect(waiter.heard.map((each) => each.outcome)).toEqual(['failed']);
    waiter.stop();
  });

  it('a commit that stores its value still announces it, naming its own token: the key now holds a fresh entry', async () => {
    const key = 'commit-stored';
    const [lapsed, current, waiting] = [newCache(), newCache(), newCache()];
    const old = await lapsedLock(lapsed, key);
    const next = await current.tryAcquireFillLockAndRead?.(key, 10_000);
    expect(next?.lock).toBeDefined();
    const waiter = await waiterOn(waiting, key);

    expect(await old.lock?.commit?.(entryOf('from the lapsed holder'), { ttl: 60_000 })).toBe(true);
    // The new holder's lock is left alone.
    expect(await client.get(redisKeys(prefix, key).lock)).toBe(next?.holder);

    await waitFor(() => waiter.heard.length >= 1, { message: "the lapsed holder's announcement" });
    const [heard] = waiter.heard;
    expect(heard?.outcome).toBe('filled');
    // A waiter on the new holder reads the key rather than take this (another holder's) entry as
    // it is; the read finds the value just written.
    expect(heard?.announced?.holder).toBe(old.token);
    expect(heard?.announced?.holder).not.toBe(next?.holder);
    expect(heard?.announced?.entry?.value).toBe('from the lapsed holder');
    expect((await waiting.get(key))?.value).toBe('from the lapsed holder');
    waiter.stop();
    await next?.lock?.release('filled');
  });
});

describe("a lapsed holder's release while nobody holds the lock", () => {
  it('still announces: its waiters may take the free lock at once instead of at their next poll', async () => {
    const key = 'lapsed-free';
    const [lapsed, waiting] = [newCache(), newCache()];
    const old = await lapsedLock(lapsed, key);
    const waiter = await waiterOn(waiting, key);

    await old.lock?.release('failed');

    await waitFor(() => waiter.heard.length >= 1, { message: "the lapsed holder's announcement" });
    expect(waiter.heard.map((each) => each.outcome)).toEqual(['failed']);
    expect(await client.exists(redisKeys(prefix, key).lock)).toBe(0);
    waiter.stop();
  });

  it('nor does a commit that stored nothing stay silent then', async () => {
    const key = 'lapsed-free-refused';
    const [lapsed, other, waiting] = [newCache(), newCache(), newCache()];
    const old = await lapsedLock(lapsed, key);
    // A tombstone newer than the lapsed holder's fill: its write is refused.
    await other.delete(key);
    const waiter = await waiterOn(waiting, key);

    expect(await old.lock?.commit?.(entryOf('from the lapsed holder', 1_000), { ttl: 60_000 })).toBe(false);

    await waitFor(() => waiter.heard.length >= 1, { message: "the lapsed holder's announcement" });
    expect(waiter.heard.map((each) => each.outcome)).toEqual(['filled']);
    waiter.stop();
  });
});

describe("a holder's own release and commit", () => {
  it('still announce, as before', async () => {
    const key = 'own';
    const [holder, waiting] = [newCache(), newCache()];
    const waiter = await waiterOn(waiting, key);
    await (await holder.tryAcquireFillLock?.(key, 10_000))?.release('failed');
    const lock = await holder.tryAcquireFillLock?.(key, 10_000);
    expect(await lock?.commit?.(entryOf('from the holder'), { ttl: 60_000 })).toBe(true);
    await waitFor(() => waiter.heard.length >= 2, { message: 'both announcements' });
    expect(waiter.heard.map((each) => [each.outcome, each.announced?.entry?.value])).toEqual([
      ['failed', undefined],
      ['filled', 'from the holder'],
    ]);
    expect(await client.exists(redisKeys(prefix, key).lock)).toBe(0);
    waiter.stop();
  });
});
