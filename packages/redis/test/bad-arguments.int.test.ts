import {
  type BackendErrorEvent,
  type CacheEntry,
  type CacheSetOptions,
  type FillLock,
  onStampedeEvent,
} from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// The Redis cache's own methods (the Redis-protocol cache's, which @stampede/node-redis and
// @stampede/upstash share), called directly rather than through the core, which always passes valid
// arguments: a bad argument is a rejected promise (never a synchronous throw) with a TypeError or
// RangeError naming it, before anything is sent. Redis holds the same keys and values afterwards,
// no backend error is reported, and the next good call works.

const HOUR = 3_600_000;
const entryOf = (value: unknown): CacheEntry => {
  const now = Date.now();
  return { value, createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
};
const OPTIONS: CacheSetOptions = { ttl: HOUR };

const prefix = randomPrefix('bad-arguments');
let client: Redis;
let lockClient: Redis;
/** Locks with the values (a lock can commit). */
let cache: RedisCache;
/** Locks on another connection (the lock-and-read step is two calls). */
let apart: RedisCache;
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

/** Every key under the prefix with its value (or its type when not a string). */
async function stored(): Promise<Record<string, unknown>> {
  const keys = (await client.keys(`${prefix}*`)).sort();
  const values = await Promise.all(
    keys.map(async (key) => ((await client.type(key)) === 'string' ? client.get(key) : client.type(key))),
  );
  return Object.fromEntries(keys.map((key, i) => [key, values[i]]));
}

let before: Record<string, unknown>;

/** Asserts that Redis holds what it held before the test and that no backend error was reported. */
async function untouched(): Promise<void> {
  expect(await stored()).toEqual(before);
  expect(events).toEqual([]);
}

/** Asserts that `call` answers a promise (no synchronous throw) rejecting with `type` and `message`. */
async function rejects(call: () => unknown, type: typeof TypeError | typeof RangeError, message: string) {
  let answer: unknown;
  expect(() => {
    answer = call();
  }).not.toThrow();
  expect(answer).toBeInstanceOf(Promise);
  const error = await (answer as Promise<unknown>).then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(type);
  expect((error as Error).message).toContain(message);
}

type Loose = (...args: unknown[]) => unknown;
const call =
  (target: RedisCache, method: 'get' | 'set' | 'delete' | 'invalidateTags'): Loose =>
  (...args) =>
    (target[method] as Loose).apply(target, args);
const lockCall =
  (target: RedisCache, method: 'tryAcquireFillLock' | 'tryAcquireFillLockAndRead'): Loose =>
  (...args) => {
    const fn = target[method];
    if (fn === undefined) throw new Error(`${method} is not available`);
    return (fn as Loose).apply(target, args);
  };

beforeAll(async () => {
  const { url } = await testRedis();
  client = new Redis(url);
  lockClient = new Redis(url);
  cache = createRedisCache({ client, prefix, name: 'bad-arguments' });
  apart = createRedisCache({ client, lockClient, prefix, name: 'bad-arguments-apart' });
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
  expect(await cache.set('kept', entryOf('kept'), OPTIONS)).toBe(true);
});
beforeEach(async () => {
  events = [];
  before = await stored();
  expect(Object.keys(before)).toEqual([`${prefix}{kept}`]);
});
afterEach(async () => {
  // Locks and tags the good calls of a test made are not the next test's business.
  for (const key of Object.keys(await stored())) if (key !== `${prefix}{kept}`) await client.del(key);
});
afterAll(async () => {
  stopListening();
  await cache.close();
  await apart.close();
  await deletePrefix(client, prefix);
  client.disconnect();
  lockClient.disconnect();
  await (await testRedis()).stop();
});

const BAD_KEYS: readonly [unknown, string][] = [
  [123, 'key must be a non-empty string; got number'],
  ['', 'key must be a non-empty string; got an empty string'],
  [undefined, 'key must be a non-empty string; got undefined'],
  [null, 'key must be a non-empty string; got null'],
];

describe('get', () => {
  it.each(BAD_KEYS)('rejects the key %j with a TypeError naming key', async (key, message) => {
    await rejects(() => call(cache, 'get')(key), TypeError, message);
    await untouched();
    expect((await cache.get('kept'))?.value).toBe('kept');
  });
});

describe('delete', () => {
  it.each(BAD_KEYS)('rejects the key %j, deleting nothing', async (key, message) => {
    await rejects(() => call(cache, 'delete')(key), TypeError, message);
    await untouched();
  });

  it('still deletes after a refused call', async () => {
    await expect(call(cache, 'delete')(5)).rejects.toThrow(
      new TypeError('key must be a non-empty string; got number'),
    );
    await cache.set('doomed', entryOf('doomed'), OPTIONS);
    await cache.delete('doomed');
    expect(await cache.get('doomed')).toBeUndefined();
  });
});

describe('set', () => {
  const now = Date.now();
  const times = { createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
  const cases: readonly [string, unknown[], string, typeof TypeError | typeof RangeError][] = [
    ['a number key', [5, entryOf('new'), OPTIONS], 'key must be a non-empty string; got number', TypeError],
    [
      'an empty key',
      ['', entryOf('new'), OPTIONS],
      'key must be a non-empty string; got an empty string',
      TypeError,
    ],
    ['a null entry', ['kept', null, OPTIONS], 'entry must be a CacheEntry object; got null', TypeError],
    [
      'an entry without times',
      ['kept', { value: 1 }, OPTIONS],
      'entry.createdAt must be a number of milliseconds; got undefined',
      TypeError,
    ],
    [
      'an entry without a value',
      ['kept', { ...times }, OPTIONS],
      'entry.value must not be undefined',
      TypeError,
    ],
    [
      'an entry with a NaN time',
      ['kept', { ...times, value: 1, freshUntil: Number.NaN }, OPTIONS],
      'entry.freshUntil must be a number of milliseconds; got NaN',
      TypeError,
    ],
    [
      'an entry with tags as a string',
      ['kept', { ...times, value: 1, tags: 'ab' }, OPTIONS],
      'entry.tags must be an array of non-empty strings; got string',
      TypeError,
    ],
    [
      'an entry with a negative delta',
      ['kept', { ...times, value: 1, delta: -1 }, OPTIONS],
      'entry.delta must be >= 0 (milliseconds); got -1',
      RangeError,
    ],
    ['no options', ['kept', entryOf('new')], 'options must be an object; got undefined', TypeError],
    [
      'a string ttl',
      ['kept', entryOf('new'), { ttl: 'x' }],
      'options.ttl must be a number of milliseconds or undefined; got string',
      TypeError,
    ],
    [
      'a NaN ttl',
      ['fresh', entryOf('new'), { ttl: Number.NaN }],
      'options.ttl must be a number of milliseconds or undefined; got NaN',
      TypeError,
    ],
    [
      'a string direct',
      ['kept', entryOf('new'), { ttl: HOUR, direct: 'yes' }],
      'options.direct must be a boolean or undefined; got string',
      TypeError,
    ],
    [
      'renewing what is not an entry',
      ['kept', entryOf('new'), { ttl: HOUR, renews: 1 }],
      'options.renews must be a CacheEntry object; got number',
      TypeError,
    ],
  ];
  it.each(cases)('rejects %s, naming it, writing nothing', async (_, args, message, type) => {
    await rejects(() => call(cache, 'set')(...args), type, message);
    await untouched();
  });

  it('still writes after a refused call', async () => {
    await expect(call(cache, 'set')('kept', { value: 1 }, { ttl: 1 })).rejects.toThrow(
      new TypeError('entry.createdAt must be a number of milliseconds; got undefined'),
    );
    expect(await cache.set('other', entryOf('other'), OPTIONS)).toBe(true);
    expect((await cache.get('other'))?.value).toBe('other');
    await cache.delete('other');
  });
});

describe('invalidateTags', () => {
  const cases: readonly [string, unknown, string][] = [
    ['a string', 'ab', 'tags must be an array of non-empty strings; got string'],
    ['undefined', undefined, 'tags must be an array of non-empty strings; got undefined'],
    ['a list holding a number', [1], 'tags must be an array of non-empty strings; it holds number'],
    [
      'a list holding an empty tag',
      ['a', ''],
      'tags must be an array of non-empty strings; it holds an empty string',
    ],
  ];
  it.each(cases)('rejects %s, naming tags, recording nothing', async (_, tags, message) => {
    await rejects(() => call(cache, 'invalidateTags')(tags), TypeError, message);
    await untouched();
  });

  it('still invalidates after a refused call', async () => {
    await expect(call(cache, 'invalidateTags')('ab')).rejects.toThrow(
      new TypeError('tags must be an array of non-empty strings; got string'),
    );
    expect(await client.keys(`${prefix}*:tag`)).toEqual([]);
    await cache.invalidateTags(['ab']);
    expect(await client.keys(`${prefix}*:tag`)).toEqual([`${prefix}{ab}:tag`]);
  });
});

describe.each([
  ['tryAcquireFillLock', 'locks with the values'],
  ['tryAcquireFillLockAndRead', 'locks with the values'],
  ['tryAcquireFillLockAndRead', 'locks on another connection'],
] as const)('%s (%s)', (method, where) => {
  const target = () => (where === 'locks with the values' ? cache : apart);
  const cases: readonly [string, unknown[], string, typeof TypeError | typeof RangeError][] = [
    ['a number key', [7, 1000], 'key must be a non-empty string; got number', TypeError],
    ['an empty key', ['', 1000], 'key must be a non-empty string; got an empty string', TypeError],
    [
      'a string ttl',
      ['k', 'x'],
      'ttl must be a finite number of milliseconds (at least 1); got string',
      TypeError,
    ],
    [
      'a negative ttl',
      ['k', -5],
      'ttl must be a finite, non-negative number of milliseconds; got -5',
      RangeError,
    ],
    ['a zero ttl', ['k', 0], 'ttl must be at least 1ms; got 0', RangeError],
    [
      'a NaN ttl',
      ['k', Number.NaN],
      'ttl must be a finite, non-negative number of milliseconds; got NaN',
      RangeError,
    ],
    [
      'an infinite ttl',
      ['k', Number.POSITIVE_INFINITY],
      'ttl must be a finite, non-negative number of milliseconds; got Infinity',
      RangeError,
    ],
  ];
  it.each(cases)('rejects %s, naming it, taking no lock', async (_, args, message, type) => {
    await rejects(() => lockCall(target(), method)(...args), type, message);
    await untouched();
  });

  it('still takes the lock after a refused call', async () => {
    await expect(lockCall(target(), method)('k', -5)).rejects.toThrow(RangeError);
    expect(await client.keys(`${prefix}*lock`)).toEqual([]);
    const answer = (await lockCall(target(), method)('k', 5_000)) as FillLock | { lock: FillLock };
    const lock = 'lock' in answer ? answer.lock : answer;
    expect(lock).toBeDefined();
    expect(await lockClient.exists(`${prefix}{k}:lock`)).toBe(1);
    await lock.release('failed');
    expect(await lockClient.exists(`${prefix}{k}:lock`)).toBe(0);
  });
});

describe("a lock's commit", () => {
  it('rejects a bad entry or options, naming them, writing nothing and keeping the lock to release', async () => {
    const lock = (await cache.tryAcquireFillLock?.('kept', 5_000)) as FillLock;
    expect(lock.commit).toBeDefined();
    before = await stored();
    const commit = (...args: unknown[]) => (lock.commit as Loose)(...args);
    await rejects(
      () => commit({ value: 1 }, OPTIONS),
      TypeError,
      'entry.createdAt must be a number of milliseconds',
    );
    await rejects(() => commit(null, OPTIONS), TypeError, 'entry must be a CacheEntry object; got null');
    await rejects(() => commit(entryOf('new'), { ttl: 'x' }), TypeError, 'options.ttl must be a number');
    await rejects(() => commit(entryOf('new')), TypeError, 'options must be an object; got undefined');
    await untouched();
    // The lock is still held, and a good commit still writes and releases it.
    expect(await client.exists(`${prefix}{kept}:lock`)).toBe(1);
    const newer = { ...entryOf('newer'), createdAt: Date.now() + 1 };
    expect(await lock.commit?.(newer, OPTIONS)).toBe(true);
    expect(await client.exists(`${prefix}{kept}:lock`)).toBe(0);
    expect((await cache.get('kept'))?.value).toBe('newer');
  });
});

describe("a lock's extend", () => {
  it.each([
    ['a NaN ttl', Number.NaN, RangeError, 'ttl'],
    ['a zero ttl', 0, RangeError, 'ttl'],
    ['a string ttl', '5s', TypeError, 'ttl must be a finite number of milliseconds (at least 1); got string'],
  ] as const)('rejects %s, naming it, and leaves the lock as it was', async (_, ttl, type, message) => {
    const lock = (await cache.tryAcquireFillLock?.('extended', 5_000)) as FillLock;
    const lockKey = `${prefix}{extended}:lock`;
    const before = await client.pttl(lockKey);
    await rejects(() => (lock.extend as Loose)(ttl), type, message);
    // Not shortened (0 or NaN used to end the lock at once or fail in the script).
    expect(await client.pttl(lockKey)).toBeGreaterThan(before - 1_000);
    expect(await lock.extend?.(10_000)).toBe(true);
    expect(await client.pttl(lockKey)).toBeGreaterThan(5_000);
    await lock.release('failed');
  });
});
