import type { CacheEntry, CacheSetOptions } from '@stampede/core';
import { describe, expect, it } from 'vitest';
import { createMemoryCache, type MemoryCache } from '../src/index.js';

// The memory cache's own methods, called directly (not through the core, which always passes valid
// arguments): a bad argument is a TypeError (RangeError for a range) naming it, thrown before
// anything is read or written, and the cache works as before afterwards.

const HOUR = 3_600_000;
const entryOf = (value: unknown, tags?: readonly string[]): CacheEntry => {
  const now = Date.now();
  return tags === undefined
    ? { value, createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR }
    : { value, createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR, tags };
};
const OPTIONS: CacheSetOptions = { ttl: HOUR };

/** A cache holding 'kept' (untagged) and 'a', 'b', 'ab' (tagged with their names' letters). */
function filled(): MemoryCache {
  const cache = createMemoryCache();
  cache.set('kept', entryOf('kept'), OPTIONS);
  cache.set('a', entryOf('a', ['a']), OPTIONS);
  cache.set('b', entryOf('b', ['b']), OPTIONS);
  cache.set('ab', entryOf('ab', ['ab']), OPTIONS);
  return cache;
}

/** What the cache holds, read back by its keys. */
const contents = (cache: MemoryCache) =>
  Object.fromEntries(['kept', 'a', 'b', 'ab'].map((key) => [key, cache.get(key)?.value]));
const FULL = { kept: 'kept', a: 'a', b: 'b', ab: 'ab' };

const BAD_KEYS: readonly [unknown, string][] = [
  [123, 'key must be a non-empty string; got number'],
  ['', 'key must be a non-empty string; got an empty string'],
  [undefined, 'key must be a non-empty string; got undefined'],
  [null, 'key must be a non-empty string; got null'],
  [['kept'], 'key must be a non-empty string; got array'],
];

describe('get', () => {
  it.each(BAD_KEYS)('throws a TypeError naming key for %j', (key, message) => {
    const cache = filled();
    expect(() => cache.get(key as string)).toThrow(new TypeError(message));
    expect(contents(cache)).toEqual(FULL);
    expect(cache.get('kept')?.value).toBe('kept');
  });
});

describe('delete', () => {
  it.each(BAD_KEYS)('throws a TypeError naming key for %j and deletes nothing', (key, message) => {
    const cache = filled();
    expect(() => cache.delete(key as string)).toThrow(new TypeError(message));
    expect(contents(cache)).toEqual(FULL);
    cache.delete('kept');
    expect(cache.get('kept')).toBeUndefined();
  });
});

describe('set', () => {
  const now = Date.now();
  const times = { createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
  const badEntries: readonly [string, unknown, string, typeof TypeError | typeof RangeError][] = [
    ['null', null, 'entry must be a CacheEntry object; got null', TypeError],
    ['a string', 'v', 'entry must be a CacheEntry object; got string', TypeError],
    ['an array', [], 'entry must be a CacheEntry object; got array', TypeError],
    [
      'without times',
      { value: 1 },
      'entry.createdAt must be a number of milliseconds; got undefined',
      TypeError,
    ],
    ['without a value', { ...times }, 'entry.value must not be undefined', TypeError],
    [
      'with a NaN time',
      { ...times, value: 1, freshUntil: Number.NaN },
      'entry.freshUntil must be a number of milliseconds; got NaN',
      TypeError,
    ],
    [
      'with a string time',
      { ...times, value: 1, staleUntil: '9' },
      'entry.staleUntil must be a number of milliseconds; got string',
      TypeError,
    ],
    [
      'with a negative delta',
      { ...times, value: 1, delta: -1 },
      'entry.delta must be >= 0 (milliseconds); got -1',
      RangeError,
    ],
    [
      'with tags as a string',
      { ...times, value: 1, tags: 'ab' },
      'entry.tags must be an array of non-empty strings; got string',
      TypeError,
    ],
    [
      'with an empty tag',
      { ...times, value: 1, tags: [''] },
      'entry.tags must be an array of non-empty strings; it holds an empty string',
      TypeError,
    ],
  ];
  it.each(badEntries)('refuses an entry %s, naming it, and writes nothing', (_, entry, message, type) => {
    const cache = filled();
    const before = cache.get('kept');
    expect(() => cache.set('kept', entry as CacheEntry, OPTIONS)).toThrow(type);
    expect(() => cache.set('kept', entry as CacheEntry, OPTIONS)).toThrow(message);
    expect(() => cache.set('fresh', entry as CacheEntry, OPTIONS)).toThrow(message);
    expect(cache.get('kept')).toBe(before);
    expect(cache.get('fresh')).toBeUndefined();
    expect(cache.size).toBe(4);
  });

  const badOptions: readonly [string, unknown, string][] = [
    ['missing', undefined, 'options must be an object; got undefined'],
    ['null', null, 'options must be an object; got null'],
    ['a number', 1000, 'options must be an object; got number'],
    [
      'with a string ttl',
      { ttl: '1s' },
      'options.ttl must be a number of milliseconds or undefined; got string',
    ],
    [
      'with a NaN ttl',
      { ttl: Number.NaN },
      'options.ttl must be a number of milliseconds or undefined; got NaN',
    ],
    [
      'with a string direct',
      { ttl: 1000, direct: 'yes' },
      'options.direct must be a boolean or undefined; got string',
    ],
    [
      'with a numeric afterInvalidations',
      { ttl: 1000, afterInvalidations: 1 },
      'options.afterInvalidations must be a boolean or undefined; got number',
    ],
    [
      'renewing what is not an entry',
      { ttl: 1000, renews: { value: 1 } },
      'options.renews.createdAt must be a number of milliseconds; got undefined',
    ],
  ];
  it.each(badOptions)('refuses options %s, naming them, and writes nothing', (_, options, message) => {
    const cache = filled();
    const before = cache.get('kept');
    const call = (key: string) =>
      (cache.set as (...args: unknown[]) => boolean)(key, entryOf('new'), options);
    expect(() => call('kept')).toThrow(new TypeError(message));
    expect(() => call('fresh')).toThrow(new TypeError(message));
    expect(cache.get('kept')).toBe(before);
    expect(cache.get('fresh')).toBeUndefined();
  });

  it.each(BAD_KEYS)('refuses the key %j, naming it, and writes nothing', (key, message) => {
    const cache = filled();
    expect(() => cache.set(key as string, entryOf('new'), OPTIONS)).toThrow(new TypeError(message));
    expect(cache.size).toBe(4);
    expect(contents(cache)).toEqual(FULL);
  });

  it('still writes after a refused call, and accepts what the contract allows', () => {
    const cache = filled();
    expect(() => cache.set('kept', { value: 1 } as CacheEntry, { ttl: 1 })).toThrow(TypeError);
    const newer = { ...entryOf('newer'), createdAt: Date.now() + 1 };
    expect(cache.set('kept', newer, OPTIONS)).toBe(true);
    expect(cache.get('kept')).toBe(newer);
    // null is a value; Infinity is "never"; an unknown option (from a newer core) is left alone.
    const forever = { value: null, createdAt: 1, freshUntil: Infinity, staleUntil: Infinity, delta: 0 };
    expect(cache.set('null', forever, { ttl: undefined, extra: true } as CacheSetOptions)).toBe(true);
    expect(cache.get('null')).toBe(forever);
    // A ttl of 0 or less is an expired entry: it removes what is stored.
    expect(cache.set('kept', { ...entryOf('gone'), createdAt: Date.now() + 2 }, { ttl: -1 })).toBe(true);
    expect(cache.get('kept')).toBeUndefined();
  });
});

describe('invalidateTags', () => {
  const badTags: readonly [string, unknown, string][] = [
    ['a string', 'ab', 'tags must be an array of non-empty strings; got string'],
    ['undefined', undefined, 'tags must be an array of non-empty strings; got undefined'],
    ['null', null, 'tags must be an array of non-empty strings; got null'],
    ['a list holding a number', [1], 'tags must be an array of non-empty strings; it holds number'],
    [
      'a list holding an empty tag',
      ['a', ''],
      'tags must be an array of non-empty strings; it holds an empty string',
    ],
  ];
  it.each(badTags)('refuses %s, naming tags, and invalidates nothing', (_, tags, message) => {
    const cache = filled();
    expect(() => cache.invalidateTags(tags as string[])).toThrow(new TypeError(message));
    expect(contents(cache)).toEqual(FULL);
  });

  const badTimes: readonly [unknown, string, typeof TypeError | typeof RangeError][] = [
    ['x', 'at must be a number of milliseconds; got string', TypeError],
    [null, 'at must be a number of milliseconds; got null', TypeError],
    [Number.NaN, 'at must be a finite number of milliseconds; got NaN', RangeError],
    [Number.POSITIVE_INFINITY, 'at must be a finite number of milliseconds; got Infinity', RangeError],
  ];
  it.each(badTimes)('refuses the time %s, naming at, and invalidates nothing', (at, message, type) => {
    const cache = filled();
    expect(() => cache.invalidateTags(['a'], at as number)).toThrow(type);
    expect(() => cache.invalidateTags(['a'], at as number)).toThrow(message);
    expect(contents(cache)).toEqual(FULL);
  });

  it('still invalidates after a refused call', () => {
    const cache = filled();
    expect(() => cache.invalidateTags('ab' as never)).toThrow(TypeError);
    expect(contents(cache)).toEqual(FULL);
    cache.invalidateTags(['ab']);
    expect(contents(cache)).toEqual({ ...FULL, ab: undefined });
    cache.invalidateTags(['a'], Date.now());
    expect(contents(cache)).toEqual({ kept: 'kept', a: undefined, b: 'b', ab: undefined });
    cache.invalidateTags([]);
    expect(cache.get('b')?.value).toBe('b');
  });
});
