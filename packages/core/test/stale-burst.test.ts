// A burst of stale reads of one key during its refresh, in one synchronous run, is answered without
// reading the cache for each call (get-or-compute.ts, `burst`), as long as nothing could have
// changed the answer. The coarse clock is set by hand (as in coarse-clock-wake.test.ts): the burst
// is remembered only while it says the grace is far from its end.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CHANGE_COUNT, createEntry } from '../src/adapter.js';
import { EXITED, RUNNING, STATE } from '../src/clock.js';
import {
  type Cache,
  type CacheEntry,
  getOrComputeWith,
  invalidate,
  invalidateTag,
  resetStats,
  setValue,
  stats,
} from '../src/node.js';
import { shared } from '../src/shared.js';
import { deferred, flush } from './helpers.js';

const clock = shared.clock as NonNullable<typeof shared.clock>;
const SWR = { ttl: 60_000, staleWhileRevalidate: 60_000 };

beforeEach(() => {
  // A running clock thread, as the node entry starts under a burst of hits.
  clock.native = Date.now;
  clock.seconds[0] = Math.floor(Date.now() / 1000);
  Atomics.store(clock.control, STATE, RUNNING);
});

afterEach(() => {
  clock.seconds[0] = 0;
  Atomics.store(clock.control, STATE, EXITED);
  clock.native = undefined;
  resetStats();
});

type Counted = Cache & { [CHANGE_COUNT]: number; reads: number; entries: Map<string, CacheEntry> };

/** A synchronous cache on a map that counts its changes (as the memory cache does) and its reads. */
function countedCache(name: string): Counted {
  const entries = new Map<string, CacheEntry>();
  const cache: Counted = {
    [CHANGE_COUNT]: 0,
    name,
    reads: 0,
    entries,
    get(key) {
      cache.reads++;
      return entries.get(key);
    },
    set(key, entry) {
      cache[CHANGE_COUNT]++;
      entries.set(key, entry);
    },
    delete(key) {
      cache[CHANGE_COUNT]++;
      entries.delete(key);
    },
    invalidateTags(tags) {
      cache[CHANGE_COUNT]++;
      for (const [key, entry] of entries) {
        if (entry.tags?.some((tag) => tags.includes(tag))) entries.delete(key);
      }
    },
  };
  return cache;
}

/** An entry that expired a moment ago and stays servable stale for a minute. */
function stale(value: unknown, tags?: readonly string[]): CacheEntry {
  const now = Date.now();
  return createEntry(value, now - 1_000, now - 5, now + 60_000, undefined, tags);
}

describe('a burst of stale reads during a refresh', () => {
  it('reads the cache once and answers every call stale, each counted', async () => {
    const cache = countedCache('burst-one-read');
    cache.entries.set('k', stale('old'));
    const gate = deferred<string>();
    const answers = [getOrComputeWith(cache, 'k', SWR, () => gate.promise)];
    for (let i = 0; i < 99; i++) answers.push(getOrComputeWith(cache, 'k', SWR, () => 'unused'));
    expect(cache.reads).toBe(1);
    expect(stats().staleHits).toBe(100);
    expect(stats().backgroundRefreshes).toBe(1);
    expect(new Set(await Promise.all(answers))).toEqual(new Set(['old']));
    gate.resolve('new');
    await flush();
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('new');
  });

  it('is read again after a change in the same run: a direct write, a delete, setValue, invalidate, invalidateTag', async () => {
    const cache = countedCache('burst-changes');
    const gate = deferred<string>();
    cache.entries.set('k', stale('old', ['t']));
    expect(await Promise.race([getOrComputeWith(cache, 'k', SWR, () => gate.promise), 'pending'])).toBe(
      'old',
    );
    // Each change below happens with no await between it and the next read.
    const reads = cache.reads;
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    cache.set('k', { ...stale('set directly', ['t']), createdAt: Date.now() }, { ttl: undefined });
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('set directly');
    cache.entries.set('k', stale('old', ['t']));
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    void setValue(cache, 'k', 'set through the core', { ttl: 60_000 });
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('set through the core');
    expect(cache.reads).toBeGreaterThan(reads);
    gate.resolve('refreshed');
    await flush();
  });

  it('an invalidation in the same run stops the burst: the next call fills', async () => {
    for (const change of ['invalidate', 'invalidateTag', 'delete'] as const) {
      const cache = countedCache(`burst-${change}`);
      cache.entries.set('k', stale('old', ['t']));
      const gate = deferred<string>();
      const options = { ...SWR, tags: ['t'] };
      const first = getOrComputeWith(cache, 'k', options, () => gate.promise);
      void getOrComputeWith(cache, 'k', options, () => 'unused');
      if (change === 'invalidate') void invalidate(cache, 'k');
      else if (change === 'invalidateTag') void invalidateTag(cache, 't');
      else cache.delete('k');
      const after = getOrComputeWith(cache, 'k', options, () => 'filled after');
      expect(await first).toBe('old');
      gate.resolve('refreshed');
      // An invalidation stops the refresh, and the miss fills; a miss after the adapter's own
      // delete joins the refresh. Neither is the stale value.
      expect(await after).toBe(change === 'delete' ? 'refreshed' : 'filled after');
      await flush();
    }
  });

  it('ends with the refresh, and at the next microtask', async () => {
    const cache = countedCache('burst-ends');
    cache.entries.set('k', stale('old'));
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', SWR, () => gate.promise);
    await Promise.resolve();
    const reads = cache.reads;
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    expect(cache.reads).toBe(reads + 1);
    gate.resolve('new');
    await flush();
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('new');
  });

  it('is not shared across options objects, nor kept for a signal or a checkValue, nor without the coarse clock', async () => {
    const cache = countedCache('burst-not-shared');
    cache.entries.set('k', stale('old'));
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', SWR, () => gate.promise);
    let reads = cache.reads;
    void getOrComputeWith(cache, 'k', { ...SWR }, () => 'unused');
    expect(cache.reads).toBe(++reads);
    const signal = new AbortController().signal;
    const withSignal = { ...SWR, signal };
    void getOrComputeWith(cache, 'k', withSignal, () => 'unused');
    void getOrComputeWith(cache, 'k', withSignal, () => 'unused');
    reads += 2;
    expect(cache.reads).toBe(reads);
    const checked = { ...SWR, checkValue: () => true };
    void getOrComputeWith(cache, 'k', checked, () => 'unused');
    void getOrComputeWith(cache, 'k', checked, () => 'unused');
    reads += 2;
    expect(cache.reads).toBe(reads);
    await Promise.resolve();
    clock.seconds[0] = 0; // no coarse time: the end of the grace cannot be vouched for
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    reads += 2;
    expect(cache.reads).toBe(reads);
    gate.resolve('new');
    await flush();
  });

  it('is not kept near the end of the grace, by the coarse clock', async () => {
    const cache = countedCache('burst-grace-end');
    const now = Date.now();
    cache.entries.set('k', createEntry('old', now - 1_000, now - 5, now + 1_000));
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', SWR, () => gate.promise);
    const reads = cache.reads;
    void getOrComputeWith(cache, 'k', SWR, () => 'unused');
    expect(cache.reads).toBe(reads + 1);
    gate.resolve('new');
    await flush();
  });

  it('a cache without a change count is read on every call', async () => {
    const cache = countedCache('burst-uncounted') as Partial<Counted>;
    delete cache[CHANGE_COUNT];
    const counted = cache as Counted;
    counted.entries.set('k', stale('old'));
    const gate = deferred<string>();
    void getOrComputeWith(counted, 'k', SWR, () => gate.promise);
    for (let i = 0; i < 9; i++) void getOrComputeWith(counted, 'k', SWR, () => 'unused');
    expect(counted.reads).toBe(10);
    gate.resolve('new');
    await flush();
  });

  it('a bad fill is still refused', async () => {
    const cache = countedCache('burst-bad-fill');
    cache.entries.set('k', stale('old'));
    const gate = deferred<string>();
    void getOrComputeWith(cache, 'k', SWR, () => gate.promise);
    await expect(getOrComputeWith(cache, 'k', SWR, 'not a function' as never)).rejects.toThrow(TypeError);
    gate.resolve('new');
    await flush();
  });
});
