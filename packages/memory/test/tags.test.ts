import { getOrComputeWith, getValue, invalidateTag, setValue } from '@stampede/core';
import { LRUCache } from 'lru-cache';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

const entry = (value: unknown, createdAt: number, tags?: readonly string[]) => ({
  value,
  createdAt,
  freshUntil: Number.POSITIVE_INFINITY,
  staleUntil: Number.POSITIVE_INFINITY,
  ...(tags === undefined ? {} : { tags }),
});

describe('memory tags', () => {
  it('an invalidated tag makes older tagged entries misses, and drops them from the LRU', () => {
    const cache = createMemoryCache();
    cache.set('a', entry('a', Date.now(), ['t']), { ttl: undefined });
    cache.set('b', entry('b', Date.now()), { ttl: undefined });
    vi.advanceTimersByTime(1);
    cache.invalidateTags(['t']);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.lru.has('a')).toBe(false);
    expect(cache.get('b')?.value).toBe('b');
  });

  it('a write of an entry a tag already invalidated leaves the key a miss (it removes an older value)', () => {
    const cache = createMemoryCache();
    const started = Date.now();
    cache.set('k', entry('older', started - 10), { ttl: undefined });
    vi.advanceTimersByTime(5);
    cache.invalidateTags(['t']);
    cache.set('k', entry('fill that read old data', started, ['t']), { ttl: undefined });
    expect(cache.get('k')).toBeUndefined();
  });

  it('`at` applies an invalidation made elsewhere at its own time, and never moves a tag back', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    cache.set('early', entry('e', now - 100, ['t']), { ttl: undefined });
    cache.set('late', entry('l', now, ['t']), { ttl: undefined });
    cache.invalidateTags(['t'], now - 50);
    expect(cache.get('early')).toBeUndefined();
    expect(cache.get('late')?.value).toBe('l');
    cache.invalidateTags(['t'], now - 500);
    expect(cache.get('late')?.value).toBe('l');
  });

  it('a tag record pushed out of its bounded map still invalidates (every older tagged entry goes)', () => {
    const cache = createMemoryCache({ lru: new LRUCache({ max: 2 }) });
    cache.set('k', entry('v', Date.now(), ['keep-me']), { ttl: undefined });
    vi.advanceTimersByTime(1);
    cache.invalidateTags(['x1']);
    cache.invalidateTags(['x2']);
    cache.invalidateTags(['x3']); // pushes x1's record out
    // 'keep-me' was never invalidated, but with x1's record gone the cache can no longer tell which
    // entries carried x1: it drops every tagged entry created before that record, never serves one.
    expect(cache.get('k')).toBeUndefined();
  });

  it('a setValue in the same millisecond as the invalidation it follows is kept; so is a fill of that millisecond', async () => {
    const cache = createMemoryCache();
    await invalidateTag(cache, 'group');
    // Repopulating the group at once: the caller knows the invalidation came first.
    await setValue(cache, 'k', 'new', { ttl: '1m', tags: ['group'] });
    expect(await getValue(cache, 'k')).toBe('new');
    // A fill the core says started after every invalidation of its tags (afterInvalidations): kept.
    cache.set('f', entry('filled', Date.now(), ['group']), { ttl: 60_000, afterInvalidations: true });
    expect(cache.get('f')?.value).toBe('filled');
    // Without that word, a fill's write of that millisecond may have started first: invalidated.
    cache.set('g', entry('filled', Date.now(), ['group']), { ttl: 60_000 });
    expect(cache.get('g')).toBeUndefined();
    // Both are covered by the next invalidation, in that millisecond too.
    await invalidateTag(cache, 'group');
    expect(cache.get('k')).toBeUndefined();
    expect(cache.get('f')).toBeUndefined();
  });

  it('a refill right after invalidateTag, in its millisecond, is kept: the next call is a hit (one fill)', async () => {
    const cache = createMemoryCache();
    let fills = 0;
    const fill = () => `v${++fills}`;
    const options = { ttl: '1m', tags: ['user:1'] } as const;
    await getOrComputeWith(cache, 'k', options, fill);
    vi.advanceTimersByTime(5);
    await invalidateTag(cache, 'user:1');
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('v2');
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('v2');
    expect(fills).toBe(2);
  });

  it('a slow refill that started right after invalidateTag is kept when it lands', async () => {
    const cache = createMemoryCache();
    let fills = 0;
    const fill = async () => {
      fills++;
      await new Promise((resolve) => setTimeout(resolve, 50));
      return `v${fills}`;
    };
    const options = { ttl: '1m', tags: ['user:1'] } as const;
    await invalidateTag(cache, 'user:1');
    const refill = getOrComputeWith(cache, 'k', options, fill);
    await vi.advanceTimersByTimeAsync(50);
    expect(await refill).toBe('v1');
    expect(await getValue(cache, 'k')).toBe('v1');
    expect(fills).toBe(1);
  });

  it('a value filled before invalidateTag in its millisecond is invalidated, and so is a fill in flight then', async () => {
    const cache = createMemoryCache();
    const options = { ttl: '1m', tags: ['t'] } as const;
    await getOrComputeWith(cache, 'before', options, () => 'old');
    let finish: (value: string) => void = () => {};
    const inFlight = getOrComputeWith(
      cache,
      'flying',
      options,
      () => new Promise<string>((resolve) => (finish = resolve)),
    );
    await invalidateTag(cache, 't');
    finish('read before the invalidation');
    expect(await inFlight).toBe('read before the invalidation');
    expect(cache.get('before')).toBeUndefined();
    expect(cache.get('flying')).toBeUndefined();
  });

  it('a fill of the millisecond of an invalidation heard from elsewhere (`at`) still reads as invalidated', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    cache.invalidateTags(['t'], now);
    const after = { ttl: 60_000, afterInvalidations: true } as const;
    cache.set('f', entry('may have read old data', now, ['t']), after);
    expect(cache.get('f')).toBeUndefined();
    // Nor does an own invalidation of another of its tags change that.
    cache.invalidateTags(['u']);
    cache.set('g', entry('may have read old data', now, ['t', 'u']), after);
    expect(cache.get('g')).toBeUndefined();
  });

  it('a fill that started before invalidateTag through another cache object on the same store is not kept', async () => {
    const cache = createMemoryCache();
    const view = { ...cache }; // the same store, another core state (its fills are not stopped)
    let finish: (value: string) => void = () => {};
    const options = { ttl: '1m', tags: ['t'] } as const;
    const filling = getOrComputeWith(
      view,
      'k',
      options,
      () => new Promise<string>((resolve) => (finish = resolve)),
    );
    await Promise.resolve();
    await invalidateTag(cache, 't');
    finish('read before the invalidation');
    expect(await filling).toBe('read before the invalidation');
    expect(cache.get('k')).toBeUndefined();
    // One started after it, on either object, is kept.
    expect(await getOrComputeWith(view, 'k', options, () => 'after')).toBe('after');
    expect(cache.get('k')?.value).toBe('after');
  });

  it('a fill that started in an earlier millisecond than the invalidation is refused, records past the clock or not', async () => {
    const cache = createMemoryCache();
    const earlier = Date.now();
    vi.advanceTimersByTime(1);
    await invalidateTag(cache, 't');
    await setValue(cache, 'v', 'direct', { ttl: '1m', tags: ['t'] }); // dated past the clock
    await invalidateTag(cache, 't'); // recorded at that date
    cache.set('f', entry('started earlier', earlier, ['t']), { ttl: 60_000, afterInvalidations: true });
    expect(cache.get('f')).toBeUndefined();
    // One that started in the invalidations' millisecond is dated past the record.
    cache.set('g', entry('started after', Date.now(), ['t']), { ttl: 60_000, afterInvalidations: true });
    expect(cache.get('g')?.value).toBe('started after');
    await invalidateTag(cache, 't');
    expect(cache.get('g')).toBeUndefined();
  });

  it("fail-safe's re-arm keeps the entry's own date: it is not dated past an invalidation", () => {
    const cache = createMemoryCache();
    const now = Date.now();
    const old = entry('old', now, ['t']);
    cache.set('k', old, { ttl: 60_000 });
    cache.invalidateTags(['t']);
    expect(cache.set('k', { ...old, freshUntil: now + 1_000 }, { ttl: 60_000, renews: old })).toBe(true);
    expect(cache.get('k')).toBeUndefined();
  });

  it('invalidate, setValue, invalidate, setValue... all in one millisecond: each read follows the last call', async () => {
    const cache = createMemoryCache();
    const now = Date.now();
    for (let round = 0; round < 3; round++) {
      await invalidateTag(cache, 'group');
      expect(await getValue(cache, 'k')).toBeUndefined();
      await setValue(cache, 'k', `v${round}`, { ttl: '1m', tags: ['group'] });
      expect(await getValue(cache, 'k')).toBe(`v${round}`);
    }
    await invalidateTag(cache, 'group');
    expect(await getValue(cache, 'k')).toBeUndefined();
    expect(Date.now()).toBe(now);
    // The records stepped a few ms past the clock; a fill's write is judged against them (a miss,
    // never an invalidated value) until the clock passes them.
    vi.advanceTimersByTime(10);
    cache.set('f', entry('filled', Date.now(), ['group']), { ttl: 60_000 });
    expect(cache.get('f')?.value).toBe('filled');
  });

  it('a burst of invalidations of one tag does not push its record into the future', () => {
    const cache = createMemoryCache({ lru: new LRUCache({ max: 4 }) });
    for (let i = 0; i < 5_000; i++) cache.invalidateTags(['hot']);
    // Other tags push records out of the bounded map (their floor must not be in the future either).
    for (const tag of ['a', 'b', 'c', 'd', 'e']) cache.invalidateTags([tag]);
    vi.advanceTimersByTime(1);
    cache.set('hot', entry('filled after', Date.now(), ['hot']), { ttl: 60_000 });
    cache.set('other', entry('never invalidated', Date.now(), ['never']), { ttl: 60_000 });
    expect(cache.get('hot')?.value).toBe('filled after');
    expect(cache.get('other')?.value).toBe('never invalidated');
  });

  it('a value set after one tag was invalidated is covered by an invalidation of its other tag in that millisecond', async () => {
    const cache = createMemoryCache();
    await invalidateTag(cache, 'a');
    await setValue(cache, 'k', 'v', { ttl: '1m', tags: ['a', 'b'] });
    expect(await getValue(cache, 'k')).toBe('v');
    await invalidateTag(cache, 'b');
    expect(await getValue(cache, 'k')).toBeUndefined();
  });

  it('two setValues of a key in the millisecond of an invalidation: the later one is read, and still covered by its own tags', async () => {
    const cache = createMemoryCache();
    await invalidateTag(cache, 'c');
    await setValue(cache, 'k', 'first', { ttl: '1m', tags: ['c'] });
    await setValue(cache, 'k', 'second', { ttl: '1m', tags: ['a'] });
    expect(await getValue(cache, 'k')).toBe('second');
    await setValue(cache, 'k', 'third', { ttl: '1m' });
    expect(await getValue(cache, 'k')).toBe('third');
    await setValue(cache, 't', 'first', { ttl: '1m', tags: ['c'] });
    await setValue(cache, 't', 'second', { ttl: '1m', tags: ['a'] });
    await invalidateTag(cache, 'a');
    expect(await getValue(cache, 't')).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(await getValue(cache, 'k')).toBe('third');
  });

  it('a later invalidation at an older time (from another replica) moves no record', () => {
    const cache = createMemoryCache();
    const now = Date.now();
    cache.invalidateTags(['t'], now - 50);
    vi.advanceTimersByTime(1);
    cache.set('k', entry('v', now - 49, ['t']), { ttl: undefined });
    cache.invalidateTags(['t'], now - 60);
    expect(cache.get('k')?.value).toBe('v');
  });

  it('works end to end through the core', async () => {
    const cache = createMemoryCache();
    let n = 0;
    const fill = () => ++n;
    expect(await getOrComputeWith(cache, 'k', { tags: ['t'] }, fill)).toBe(1);
    expect(await getOrComputeWith(cache, 'k', { tags: ['t'] }, fill)).toBe(1);
    await invalidateTag(cache, 't');
    vi.advanceTimersByTime(1);
    expect(await getOrComputeWith(cache, 'k', { tags: ['t'] }, fill)).toBe(2);
  });
});
