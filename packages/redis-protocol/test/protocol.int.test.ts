import { createHash } from 'node:crypto';
import { onStampedeEvent } from '@stampede/core';
import { type CacheEntry, jsonSerializer } from '@stampede/core/adapter';
import { deletePrefix, randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createOperationRunner,
  createRedisProtocolCache,
  createRedisProtocolContext,
  createScriptRunner,
  type RedisProtocolClient,
  RedisProtocolError,
  remoteKeys,
  TIME_SCRIPT,
} from '../src/index.js';

let redis: Redis;
const prefix = randomPrefix('protocol');

// The smallest binding: ioredis adapted to the client interface, as a binding author writes it.
function adapt(client: Redis, sha1?: RedisProtocolClient['sha1']): RedisProtocolClient {
  return {
    get: (key) => client.get(key),
    setIfAbsent: (key, value, px) => client.set(key, value, 'PX', px, 'NX'),
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
    ...(sha1 === undefined ? {} : { sha1 }),
  };
}

function cacheOn(client: RedisProtocolClient, name = 'protocol-test') {
  const createError = (...args: ConstructorParameters<typeof RedisProtocolError>) =>
    new RedisProtocolError(...args);
  const operations = createOperationRunner({ name, label: 'test', operationTimeout: 2_000, createError });
  const context = createRedisProtocolContext(client, prefix, operations);
  return createRedisProtocolCache(context, { serializer: jsonSerializer, tombstoneTtl: 5_000, createError });
}

function entry(value: unknown, createdAt = Date.now()): CacheEntry {
  return { value, createdAt, freshUntil: createdAt + 60_000, staleUntil: createdAt + 120_000 };
}

beforeAll(async () => {
  const { url } = await testRedis();
  redis = new Redis(url);
});

afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('the script runner', () => {
  it('falls back to EVAL when the server lacks the script, then runs it by EVALSHA', async () => {
    // A source no other test sends, so the server cannot have it cached yet.
    const script = { source: `return '${prefix}'` };
    const sha = createHash('sha1').update(script.source).digest('hex');
    expect(await redis.script('EXISTS', sha)).toEqual([0]);
    const run = createScriptRunner(adapt(redis));
    expect(await run(script, [], [])).toBe(prefix);
    // EVAL cached it on the server; the next run's EVALSHA finds it.
    expect(await redis.script('EXISTS', sha)).toEqual([1]);
    expect(await run(script, [], [])).toBe(prefix);
  });

  it('sends plain EVAL when no SHA-1 can be computed, and uses Web Crypto by default', async () => {
    const source = `return '${prefix}plain'`;
    const sha = createHash('sha1').update(source).digest('hex');
    const plain = createScriptRunner(adapt(redis, () => undefined));
    expect(await plain({ source }, [], [])).toBe(`${prefix}plain`);
    const evalshaSeen: string[] = [];
    const client = adapt(redis);
    const spy: RedisProtocolClient = {
      ...client,
      evalsha: (s, keys, args) => {
        evalshaSeen.push(s);
        return client.evalsha(s, keys, args);
      },
    };
    expect(await createScriptRunner(spy)({ source }, [], [])).toBe(`${prefix}plain`);
    expect(evalshaSeen).toEqual([sha]);
  });
});

describe('the shared cache body', () => {
  it('writes and reads the envelope, refuses an older write, and a delete leaves a tombstone', async () => {
    const cache = cacheOn(adapt(redis));
    const now = Date.now();
    await cache.set('k', entry('new', now), { ttl: 60_000 });
    expect((await cache.get('k'))?.value).toBe('new');
    const stored = await redis.get(remoteKeys(prefix, 'k').value);
    expect(stored).toMatch(/^s1\|\d+\|\d+\|\d+\|"new"$/);
    await cache.set('k', entry('old', now - 10_000), { ttl: 60_000 });
    expect((await cache.get('k'))?.value).toBe('new');
    await cache.delete('k');
    expect(await cache.get('k')).toBeUndefined();
    expect(await redis.get(remoteKeys(prefix, 'k').value)).toMatch(/^t\|\d+$/);
    expect(await redis.pttl(remoteKeys(prefix, 'k').value)).toBeLessThanOrEqual(5_000);
    // A fill that started before the delete cannot bring the value back.
    await cache.set('k', entry('stale fill', now), { ttl: 60_000 });
    expect(await cache.get('k')).toBeUndefined();
  });

  it('reads an undecodable entry as a miss and reports E_STAMPEDE_BACKEND_DECODE', async () => {
    const cache = cacheOn(adapt(redis), 'protocol-decode');
    await redis.set(remoteKeys(prefix, 'garbage').value, 's1|not an envelope');
    const seen: unknown[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'backend-error' && event.cache === 'protocol-decode') seen.push(event.error);
    });
    try {
      expect(await cache.get('garbage')).toBeUndefined();
    } finally {
      stop();
    }
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ code: 'E_STAMPEDE_BACKEND_DECODE', key: 'garbage' });
  });

  it('refuses a value the serializer cannot encode with E_STAMPEDE_BACKEND_ENCODE', async () => {
    const cache = cacheOn(adapt(redis));
    await expect(cache.set('bigint', entry(1n), { ttl: 60_000 })).rejects.toMatchObject({
      code: 'E_STAMPEDE_BACKEND_ENCODE',
      key: 'bigint',
    });
    expect(await redis.exists(remoteKeys(prefix, 'bigint').value)).toBe(0);
  });

  it('grants the fill lock to one holder, extends it only for its owner, and frees it on release', async () => {
    const cache = cacheOn(adapt(redis));
    const lock = await cache.tryAcquireFillLock('locked', 2_000);
    expect(lock).toBeDefined();
    expect(await cache.tryAcquireFillLock('locked', 2_000)).toBeUndefined();
    expect(await lock?.extend?.(30_000)).toBe(true);
    expect(await redis.pttl(remoteKeys(prefix, 'locked').lock)).toBeGreaterThan(2_000);
    await lock?.release('filled');
    expect(await redis.exists(remoteKeys(prefix, 'locked').lock)).toBe(0);
    expect(await lock?.extend?.(30_000)).toBe(false);
    const next = await cache.tryAcquireFillLock('locked', 2_000);
    expect(next).toBeDefined();
    await next?.release('failed');
  });
});

describe('the four envelope forms on the server', () => {
  const forms = [
    { name: 's1', extra: {}, header: /^s1\|/ },
    { name: 's2', extra: { delta: 40 }, header: /^s2\|\d+\|\d+\|\d+\|40\|/ },
    { name: 's1t', extra: { tags: ['g', 'h|i'] }, header: /^s1t\|\d+\|\d+\|\d+\|g,h%7Ci\|/ },
    { name: 's2t', extra: { delta: 40, tags: ['g', 'h|i'] }, header: /^s2t\|\d+\|\d+\|\d+\|40\|g,h%7Ci\|/ },
  ] as const;
  // `cluster: true` on a standalone server takes the read that runs no script (GET, then the tags'
  // keys), as a Cluster client without a slot-pinning prefix does.
  for (const apart of [false, true]) {
    for (const form of forms) {
      it(`${form.name}${apart ? ' (read apart)' : ''}: the write guard reads its createdAt, and an invalidated tag hides it`, async () => {
        const client: RedisProtocolClient = { ...adapt(redis), cluster: apart };
        const cache = cacheOn(client, `protocol-forms-${form.name}`);
        const key = `form-${form.name}-${apart}`;
        const now = Date.now();
        await cache.set(key, { ...entry('new', now), ...form.extra }, { ttl: 60_000 });
        expect(await redis.get(remoteKeys(prefix, key).value)).toMatch(form.header);
        // An older write is refused: the guard found the stored createdAt in this header.
        expect(await cache.set(key, { ...entry('old', now - 10_000), ...form.extra }, { ttl: 60_000 })).toBe(
          false,
        );
        const read = await cache.get(key);
        expect(read).toMatchObject({ value: 'new', ...form.extra });
        // Tags of their own, so that no other case's entries are touched.
        const tag = `g-${form.name}-${apart}`;
        const tagged = 'tags' in form.extra ? { ...form.extra, tags: [tag, 'h|i'] } : form.extra;
        await cache.set(key, { ...entry('tagged', now + 1), ...tagged }, { ttl: 60_000 });
        expect((await cache.get(key))?.value).toBe('tagged');
        await cache.invalidateTags([tag]);
        if ('tags' in form.extra) expect(await cache.get(key)).toBeUndefined();
        else expect((await cache.get(key))?.value).toBe('tagged');
        // A value created after the invalidation is served again.
        await new Promise((resolve) => setTimeout(resolve, 5));
        await cache.set(key, { ...entry('after', Date.now() + 2), ...tagged }, { ttl: 60_000 });
        expect(await cache.get(key)).toMatchObject({ value: 'after', ...tagged });
      });
    }
  }
});

describe('a tagged direct write (setValue) and tag invalidations, ordered on Redis', () => {
  // A client whose clock script (TIME) answers `skew` ms off: the cache's estimate of Redis's clock
  // is that far off, as after a measurement whose request was slow and whose reply fast (the
  // estimate, the middle of the round trip, then runs ahead of Redis by up to half of it). 50 ms,
  // so that the outcome does not hang on this machine's timing.
  function skewed(skew: number, cluster: boolean): RedisProtocolClient {
    const base = adapt(redis);
    const timeSha = createHash('sha1').update(TIME_SCRIPT.source).digest('hex');
    const shift = (reply: unknown): unknown => Number(reply) + skew;
    return {
      ...base,
      cluster,
      evalsha: async (sha, keys, args) => {
        const reply = await base.evalsha(sha, keys, args);
        return sha === timeSha ? shift(reply) : reply;
      },
      eval: async (script, keys, args) => {
        const reply = await base.eval(script, keys, args);
        return script === TIME_SCRIPT.source ? shift(reply) : reply;
      },
    };
  }
  const serverNow = async (): Promise<number> => {
    const [seconds, micros] = await redis.time();
    return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  };
  const tagged = (value: unknown, tags: string[]): CacheEntry => ({ ...entry(value), tags });
  const direct = { ttl: 60_000, direct: true } as const;
  const storedCreatedAt = async (key: string): Promise<number> =>
    Number((await redis.get(remoteKeys(prefix, key).value))?.split('|')[1]);

  // `cluster: true` on a standalone server: the scripts may not touch the tags' keys, as in a
  // Cluster whose prefix does not pin one slot.
  for (const apart of [false, true]) {
    const label = apart ? ' (tags apart)' : '';

    it(`a setValue stamped ahead by its writer's estimate is still covered by an invalidation made after it${label}`, async () => {
      const writer = cacheOn(skewed(50, apart), `protocol-ahead-${apart}`);
      const other = cacheOn({ ...adapt(redis), cluster: apart }, `protocol-steady-${apart}`);
      await Promise.all([writer.get('warm'), other.get('warm')]);
      const key = `ahead-${apart}`;
      const tag = `ahead-tag-${apart}`;
      await writer.set(key, tagged('old', [tag]), direct);
      // Dated by Redis, not by the estimate 50 ms ahead.
      expect(await storedCreatedAt(key)).toBeLessThanOrEqual(await serverNow());
      await other.invalidateTags([tag]);
      expect(await other.get(key)).toBeUndefined();
      expect(await writer.get(key)).toBeUndefined();
      // The writer invalidating its own write, too.
      await writer.set(key, tagged('again', [tag]), direct);
      await writer.invalidateTags([tag]);
      expect(await writer.get(key)).toBeUndefined();
    });

    it(`a setValue stamped behind by its writer's estimate, made after an invalidation, is served${label}`, async () => {
      const writer = cacheOn(skewed(-50, apart), `protocol-behind-${apart}`);
      const other = cacheOn({ ...adapt(redis), cluster: apart }, `protocol-steady-${apart}`);
      await Promise.all([writer.get('warm'), other.get('warm')]);
      const key = `behind-${apart}`;
      const tag = `behind-tag-${apart}`;
      await other.invalidateTags([tag]);
      // Past the invalidation's millisecond (the tie is the next case's).
      await new Promise((resolve) => setTimeout(resolve, 3));
      await writer.set(key, tagged('new', [tag]), direct);
      expect(await other.get(key)).toMatchObject({ value: 'new' });
      expect(await writer.get(key)).toMatchObject({ value: 'new' });
    });
  }

  // A tag recorded at or after the write's `TIME` is what an invalidation of the same millisecond
  // leaves (or one recorded by a replica refused TIME, by its estimate): recorded here 500 ms
  // ahead, so that the case does not hang on landing both in one millisecond (5 ms was not enough on
  // a loaded CI run: the write came 6 ms later).
  it('a setValue after an invalidation of its millisecond is served, and the next invalidation of any of its tags covers it', async () => {
    const cache = cacheOn(adapt(redis), 'protocol-tie');
    await cache.get('warm');
    for (const [n, invalidated] of [
      [0, 'tie-a'],
      [1, 'tie-b'],
    ] as const) {
      const key = `tie-${n}`;
      await redis.set(`${prefix}{tie-a}:tag`, String((await serverNow()) + 500));
      await cache.set(key, tagged('set after', ['tie-a', 'tie-b']), direct);
      expect(await cache.get(key)).toMatchObject({ value: 'set after' });
      expect(await storedCreatedAt(key)).toBe(Number(await redis.get(`${prefix}{tie-a}:tag`)) + 1);
      // Invalidated again (through the tag that was recorded, or the other one): a miss.
      await cache.invalidateTags([invalidated]);
      expect(await cache.get(key)).toBeUndefined();
    }
    // The stamp keys expire (kept a minute past the stamp).
    expect(await redis.pttl(`${prefix}{tie-b}:stamp`)).toBeGreaterThan(0);
  });

  it('with the tags apart (a Cluster whose prefix does not pin a slot), such a setValue reads as invalidated: a miss, never a stale value', async () => {
    const cache = cacheOn({ ...adapt(redis), cluster: true }, 'protocol-tie-apart');
    await cache.get('warm');
    await redis.set(`${prefix}{tie-apart}:tag`, String((await serverNow()) + 500));
    await cache.set('tie-apart', tagged('set after', ['tie-apart']), direct);
    expect(await cache.get('tie-apart')).toBeUndefined();
    expect(await redis.exists(`${prefix}{tie-apart}:stamp`)).toBe(0);
  });

  it('dates the s2t form too, and leaves a fill (not direct) dated by its writer', async () => {
    const cache = cacheOn(skewed(50, false), 'protocol-forms-direct');
    await cache.get('warm');
    await cache.set('direct-s2t', { ...tagged('v', ['f']), delta: 40 }, direct);
    const text = (await redis.get(remoteKeys(prefix, 'direct-s2t').value)) ?? '';
    expect(text).toMatch(/^s2t\|\d+\|\d+\|\d+\|40\|f\|"v"$/);
    expect(await storedCreatedAt('direct-s2t')).toBeLessThanOrEqual(await serverNow());
    // A fill's write keeps the time its writer gave it (the estimate's, here 50 ms ahead).
    await cache.set('fill-s1t', tagged('v', ['f']), { ttl: 60_000 });
    expect(await storedCreatedAt('fill-s1t')).toBeGreaterThan((await serverNow()) + 30);
  });
});
