import { type CacheEntry, getOrComputeWith, invalidate, resetStats, stats } from '@stampede/core';
import { deferred, waitFor } from '@stampede/test-support';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createUpstashCache, isUpstashCacheError, upstashKeys } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-cache');
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(() => {
  resetStats();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The herd's fill takes this long on purpose: the other instance's callers wait on the lock meanwhile. */
const HERD_FILL_MS = 150;

function entry(value: unknown, createdAt: number, ttl = 60_000): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + ttl, staleUntil: createdAt + ttl };
}

describe.each([{ automaticDeserialization: true }, { automaticDeserialization: false }])(
  'the stored envelope, %o',
  (mode) => {
    it('is an s1| string the client hands back untouched, whatever the value', async () => {
      const client = h.client(mode);
      const cache = createUpstashCache({ client, prefix: h.nextPrefix() });
      // Values that are themselves JSON text must come back as text, not parsed.
      // One key per value: a write right after a delete of the same key is ordered against it on
      // Redis's clock (see stale-write guard below), which is not what this test is about.
      const values = ['{"a":1}', '42', 'null', { nested: ['x', 1] }, 'héllo 🚀, world'];
      for (const [index, value] of values.entries()) {
        const key = `k${index}`;
        const written = entry(value, Date.now());
        await cache.set(key, written, { ttl: 60_000 });
        const raw = await client.get<unknown>(upstashKeys(cache.prefix, key).value);
        expect(typeof raw).toBe('string');
        expect(String(raw).startsWith('s1|')).toBe(true);
        // The value exactly; the times through this cache's estimate of Redis's clock, which a
        // slow first measurement (the REST server on a loaded machine) may still correct meanwhile.
        const read = await cache.get(key);
        expect(read?.value).toEqual(value);
        expect(Math.abs((read?.createdAt ?? 0) - written.createdAt)).toBeLessThan(50);
        expect(Math.abs((read?.freshUntil ?? 0) - written.freshUntil)).toBeLessThan(50);
      }
    });

    it("is an s2| string for an entry with its fill's duration, which reads back exactly", async () => {
      const client = h.client(mode);
      const cache = createUpstashCache({ client, prefix: h.nextPrefix() });
      const written = { ...entry('{"a":1}', Date.now()), delta: 42 };
      await cache.set('timed', written, { ttl: 60_000 });
      const raw = await client.get<unknown>(upstashKeys(cache.prefix, 'timed').value);
      expect(String(raw)).toMatch(/^s2\|\d+\|\d+\|\d+\|42\|/);
      expect(await cache.get('timed')).toMatchObject({ value: '{"a":1}', delta: 42 });
    });

    it('reads a foreign value under its key as a miss and a counted decode error', async () => {
      const client = h.client(mode);
      const cache = createUpstashCache({ client, prefix: h.nextPrefix() });
      await client.set(upstashKeys(cache.prefix, 'foreign').value, { not: 'an envelope' });
      expect(await cache.get('foreign')).toBeUndefined();
      expect(stats().backendErrors).toBe(1);
    });
  },
);

describe('stale-write guard and tombstones', () => {
  it('refuses a fill that started before a delete, and accepts one that started after', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix() });
    const startedBefore = Date.now() - 50;
    await cache.delete('k');
    await cache.set('k', entry('too old', startedBefore), { ttl: 60_000 });
    expect(await cache.get('k')).toBeUndefined();
    // A write that starts after the delete lands once its start is past the delete on Redis's clock as
    // this cache estimates it (to within a round trip: a few ms, more on a loaded machine).
    await waitFor(
      async () => {
        await cache.set('k', entry('fresh', Date.now()), { ttl: 60_000 });
        return (await cache.get('k'))?.value === 'fresh';
      },
      { timeout: 2_000, message: 'a write started after the delete to land' },
    );
  });

  it('keeps a tombstone only for tombstoneTtl', async () => {
    const client = h.client();
    const cache = createUpstashCache({ client, prefix: h.nextPrefix(), tombstoneTtl: 150 });
    const old = Date.now() - 1_000;
    await cache.delete('k');
    expect(await client.pttl(upstashKeys(cache.prefix, 'k').value)).toBeGreaterThan(0);
    // Gone within twice its 150 ms tombstoneTtl.
    await waitFor(async () => (await client.exists(upstashKeys(cache.prefix, 'k').value)) === 0, {
      timeout: 300,
      message: 'the tombstone to expire',
    });
    await cache.set('k', entry('old but allowed', old), { ttl: 60_000 });
    expect((await cache.get('k'))?.value).toBe('old but allowed');
  });

  it('does not let an invalidated in-flight fill write, across two cache instances', async () => {
    const prefix = h.nextPrefix();
    const a = createUpstashCache({ client: h.client(), prefix });
    const b = createUpstashCache({ client: h.client(), prefix });
    const gate = deferred<void>();
    let filling = false;
    const pending = getOrComputeWith(a, 'k', { ttl: 60_000 }, async () => {
      filling = true;
      await gate.promise;
      return 'computed before the invalidation';
    });
    // The fill has started (after its read) before the other instance invalidates.
    await waitFor(() => filling, { message: 'the fill to start' });
    await invalidate(b, 'k');
    gate.resolve();
    expect(await pending).toBe('computed before the invalidation');
    expect(await b.get('k')).toBeUndefined();
  });

  it('stores an entry with no ttl without expiry and a ttl as PX', async () => {
    const client = h.client();
    const cache = createUpstashCache({ client, prefix: h.nextPrefix() });
    await cache.set('forever', entry(1, Date.now()), { ttl: undefined });
    expect(await client.pttl(upstashKeys(cache.prefix, 'forever').value)).toBe(-1);
    await cache.set('brief', entry(1, Date.now()), { ttl: 5_000 });
    const pttl = await client.pttl(upstashKeys(cache.prefix, 'brief').value);
    expect(pttl).toBeGreaterThan(4_000);
    expect(pttl).toBeLessThanOrEqual(5_000);
  });

  it('rejects a value the serializer cannot encode with an E_STAMPEDE_BACKEND_ENCODE error', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix() });
    const error = await cache.set('k', entry(10n, Date.now()), { ttl: 1_000 }).catch((e: unknown) => e);
    expect(isUpstashCacheError(error)).toBe(true);
    expect((error as { code: string }).code).toBe('E_STAMPEDE_BACKEND_ENCODE');
  });
});

describe('fill lock', () => {
  it('extends only while held, and its scripts survive SCRIPT FLUSH', async () => {
    const client = h.client();
    const cache = createUpstashCache({ client, prefix: h.nextPrefix() });
    const lockKey = upstashKeys(cache.prefix, 'k').lock;
    const lock = await cache.tryAcquireFillLock?.('k', 200);
    expect(lock).toBeDefined();
    await client.scriptFlush();
    expect(await lock?.extend?.(5_000)).toBe(true);
    expect(await client.pttl(lockKey)).toBeGreaterThan(4_000);
    await client.scriptFlush();
    await lock?.release('filled');
    expect(await client.exists(lockKey)).toBe(0);
    expect(await lock?.extend?.(5_000)).toBe(false);
  });

  it('keeps user keys, locks and channels apart (a key named like a lock is just a key)', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix() });
    await cache.set('k:lock', entry('value', Date.now()), { ttl: 60_000 });
    const lock = await cache.tryAcquireFillLock?.('k', 5_000);
    expect(lock).toBeDefined();
    expect((await cache.get('k:lock'))?.value).toBe('value');
    await lock?.release('filled');
    expect(new Set(Object.values(upstashKeys('p:', 'a{b}c'))).size).toBe(3);
    expect(upstashKeys('p:', 'a{b}c').value).not.toBe(upstashKeys('p:', 'a%7Bb%7Dc').value);
  });

  it('serves a distributed-lock herd across two instances with one fill', async () => {
    const prefix = h.nextPrefix();
    const a = createUpstashCache({ client: h.client(), prefix });
    const b = createUpstashCache({ client: h.client({ autoPipelining: false }), prefix });
    let fills = 0;
    const fill = async () => {
      fills++;
      await sleep(HERD_FILL_MS);
      return { n: 7 };
    };
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 20 };
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => getOrComputeWith(i % 2 === 0 ? a : b, 'hot', options, fill)),
    );
    expect(fills).toBe(1);
    expect(results).toEqual(Array.from({ length: 40 }, () => ({ n: 7 })));
    expect(stats().lockWaitHits).toBe(1);
  });
});

describe('start', () => {
  it("sends the clock's first measurement when the cache is made, and no more commands than without it", async () => {
    const client = h.client();
    const sent: string[] = [];
    const counting = {
      get: (key: string) => {
        sent.push('get');
        return client.get(key);
      },
      set: client.set.bind(client),
      eval: (script: string, keys: string[], args: unknown[]) => {
        sent.push('eval');
        return client.eval(script, keys, args);
      },
      evalsha: (sha: string, keys: string[], args: unknown[]) => {
        sent.push('evalsha');
        return client.evalsha(sha, keys, args);
      },
    } as unknown as typeof client;
    const cache = createUpstashCache({ client: counting, prefix: h.nextPrefix() });
    // The client's first request (the runtime's fetch, its connection) is under way before any use.
    expect(sent).toHaveLength(1);
    await waitFor(() => expect(sent.length).toBe(1));
    await sleep(200);
    expect(sent).toHaveLength(1);
    // The first read finds the clock measured: it sends only itself.
    expect(await cache.get('missing')).toBeUndefined();
    expect(sent).toHaveLength(2);
  });
});
