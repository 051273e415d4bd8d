import type { CacheEntry } from '@stampede/core';
import { describe, expect, it } from 'vitest';
import { createMemoryCache, type MemoryCache } from '../src/index.js';

// What only the memory cache takes: `invalidateTags(tags, at)`, where `at` is when another replica
// invalidated them (a tiered cache passes it for an invalidation heard on the bus). A bad `at` is
// refused, naming it, before any tag is recorded. The arguments every cache takes (keys, entries,
// set options, tags) are checked by the conformance suite (`checksArguments`, conformance.test.ts)
// and the kit's messages by core's cache-arguments.test.ts.

const HOUR = 3_600_000;
const tagged = (value: string): CacheEntry => {
  const now = Date.now();
  return { value, createdAt: now - 1_000, freshUntil: now + HOUR, staleUntil: now + HOUR, tags: [value] };
};

/** A cache holding 'a' and 'b', each tagged with its own name. */
function filled(): MemoryCache {
  const cache = createMemoryCache();
  for (const key of ['a', 'b']) cache.set(key, tagged(key), { ttl: HOUR });
  return cache;
}

const contents = (cache: MemoryCache) => ({ a: cache.get('a')?.value, b: cache.get('b')?.value });

describe('invalidateTags(tags, at)', () => {
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
    expect(contents(cache)).toEqual({ a: 'a', b: 'b' });
  });

  it('still invalidates at a good time after a refused one', () => {
    const cache = filled();
    expect(() => cache.invalidateTags(['a'], Number.NaN)).toThrow(RangeError);
    cache.invalidateTags(['a'], Date.now());
    expect(contents(cache)).toEqual({ a: undefined, b: 'b' });
  });
});
