// A burst of stale reads during a refresh, on an adapter that keeps a change count (`CHANGES`): the
// burst's later reads are answered from its first one (get-or-compute.ts, staleAgain) only while
// the full path would answer the same. Each case changes one thing that answer rests on between two
// reads of a burst, and checks that the next read sees it. Fake timers: the coarse clock is not
// trusted under them, so every judgement of time here is the real clock's, at exact instants.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHANGES } from '../src/adapter.js';
import { staleReads } from '../src/flight.js';
import {
  type Cache,
  type CacheEntry,
  type CacheSetOptions,
  getOrComputeWith,
  invalidate,
  resetStats,
  setValue,
  stats,
} from '../src/index.js';
import { deferred, flush, testCache } from './helpers.js';

const TTL = 30_000;
const GRACE = 300_000;
const START = 1_000_000;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: START });
});
afterEach(() => {
  vi.useRealTimers();
});

type Counted = Cache & { [CHANGES]: number; reads: () => number; writesHeld?: () => void };

/**
 * A test cache that keeps a change count, raised on every write and delete. With `holdWrites`, a
 * write lands (and counts) only when `writesHeld()` is called.
 */
function countedCache({ holdWrites = false } = {}): Counted {
  const inner = testCache();
  const held: (() => void)[] = [];
  const cache: Counted = {
    [CHANGES]: 0,
    name: 'counted',
    reads: () => inner.calls.get,
    get: (key: string) => inner.get(key),
    set(key: string, entry: CacheEntry, options: CacheSetOptions) {
      const land = () => {
        cache[CHANGES]++;
        inner.set(key, entry, options);
      };
      if (!holdWrites) return land();
      return new Promise<void>((resolve) => {
        held.push(() => {
          land();
          resolve();
        });
      });
    },
    delete(key: string) {
      cache[CHANGES]++;
      return inner.delete(key);
    },
  };
  if (holdWrites) {
    cache.writesHeld = () => {
      for (const land of held.splice(0)) land();
    };
  }
  return cache;
}

/** `cache` holding 'old' for `key`, now stale, its refresh started by a first stale read and held. */
async function staleDuringRefresh(cache: Cache, options: object, key = 'k') {
  await getOrComputeWith(cache, key, { ...options }, () => 'old');
  vi.setSystemTime(START + TTL + 1);
  const gate = deferred<string>();
  const refresh = vi.fn(() => gate.promise);
  expect(await getOrComputeWith(cache, key, options, refresh)).toBe('old');
  expect(refresh).toHaveBeenCalledTimes(1);
  return { gate, refresh };
}

/**
 * A counted cache and `options` (`swr()`, or one typed for a test that changes it) whose stale read of 'k'
 * is noted on the held refresh: the read that started the refresh, then one more.
 */
async function burstNoted<O extends object>(options: O) {
  const cache = countedCache();
  const { gate, refresh } = await staleDuringRefresh(cache, options);
  expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
  return { cache, options, gate, refresh };
}

const swr = () => ({ ttl: TTL, staleWhileRevalidate: GRACE });

/** Whether `answer` has settled (after the microtasks queued now have run). */
async function settled(answer: Promise<unknown>): Promise<boolean> {
  let done = false;
  answer.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await flush();
  return done;
}

describe('a burst of stale reads during a refresh', () => {
  it('reads the cache for its first reads only, and answers each as the full path would', async () => {
    const cache = countedCache();
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    const { gate, refresh } = await staleDuringRefresh(cache, options);
    const readsBefore = cache.reads();
    const answers = Array.from({ length: 200 }, () => getOrComputeWith(cache, 'k', options, refresh));
    // The first read of the burst notes what it served; the rest are answered from it.
    expect(cache.reads() - readsBefore).toBe(1);
    expect(new Set(answers).size).toBe(1); // the entry's one settled promise, as every stale read gets
    expect(await Promise.all(answers)).toEqual(Array(200).fill('old'));
    expect(stats()).toMatchObject({ staleHits: 201, backgroundRefreshes: 1 });
    expect(refresh).toHaveBeenCalledTimes(1);
    gate.resolve('new');
    await flush();
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('new');
  });

  it('on an adapter without a change count, reads the cache on every call', async () => {
    const cache = testCache();
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    const { gate, refresh } = await staleDuringRefresh(cache, options);
    const readsBefore = cache.calls.get;
    await Promise.all(Array.from({ length: 50 }, () => getOrComputeWith(cache, 'k', options, refresh)));
    expect(cache.calls.get - readsBefore).toBe(50);
    gate.resolve('new');
    await flush();
  });

  it('answers only its own key on its own cache: another key, or the same key on another cache, is read', async () => {
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    const cache = countedCache();
    const other = countedCache();
    await getOrComputeWith(other, 'k', options, () => 'other cache');
    await getOrComputeWith(cache, 'j', options, () => 'other key');
    const { gate, refresh } = await staleDuringRefresh(cache, options);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
    expect(await getOrComputeWith(cache, 'j', options, refresh)).toBe('other key');
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
    expect(await getOrComputeWith(other, 'k', options, refresh)).toBe('other cache');
    gate.resolve('new');
    await flush();
  });

  it('answers interleaved bursts of two keys, each from its own note, without reading the cache', async () => {
    const cache = countedCache();
    const options = swr();
    await getOrComputeWith(cache, 'k', { ...options }, () => 'old k');
    await getOrComputeWith(cache, 'j', { ...options }, () => 'old j');
    vi.setSystemTime(START + TTL + 1);
    const gate = deferred<string>();
    const refresh = vi.fn(() => gate.promise);
    // Each key's first read starts its refresh, its second is noted; the latest note is j's.
    for (const key of ['k', 'j', 'k', 'j']) {
      expect(await getOrComputeWith(cache, key, options, refresh)).toBe(`old ${key}`);
    }
    const readsBefore = cache.reads();
    const keys = Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? 'k' : 'j'));
    const answers = keys.map((key) => getOrComputeWith(cache, key, options, refresh));
    expect(cache.reads() - readsBefore).toBe(0);
    expect(await Promise.all(answers)).toEqual(keys.map((key) => `old ${key}`));
    expect(refresh).toHaveBeenCalledTimes(2);
    gate.resolve('new');
    await flush();
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('new');
  });

  describe('sees, at its next read, a change to the entry', () => {
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    const cases: [string, (cache: Counted) => unknown, string | undefined][] = [
      // Gone: the next read is a miss, which waits for the refresh in flight.
      ['a delete made on the adapter', (cache) => cache.delete('k'), 'new'],
      [
        'a newer entry written on the adapter',
        (cache) =>
          cache.set(
            'k',
            { value: 'written', createdAt: Date.now(), freshUntil: Date.now() + TTL, staleUntil: Infinity },
            { ttl: undefined },
          ),
        'written',
      ],
      ['setValue', (cache) => setValue(cache, 'k', 'set', { ttl: TTL }), 'set'],
      // invalidate stops the refresh from writing: the next read starts a fill of its own.
      ['invalidate', (cache) => invalidate(cache, 'k'), 'filled'],
    ];
    it.each(cases)('%s', async (_name, change, expected) => {
      const cache = countedCache();
      const { gate } = await staleDuringRefresh(cache, options);
      const burst = Array.from({ length: 10 }, () => getOrComputeWith(cache, 'k', options, () => 'filled'));
      await change(cache);
      const next = getOrComputeWith(cache, 'k', options, () => 'filled');
      gate.resolve('new');
      expect(await Promise.all(burst)).toEqual(Array(10).fill('old'));
      expect(await next).toBe(expected);
    });
  });

  it('a refresh superseded while the cache still holds the entry: the next read starts another', async () => {
    // invalidate stops the refresh at once; here the adapter's delete then fails, so the entry (and
    // the count) stay: the next stale read is read afresh, and refreshes again, as with no burst.
    const { cache, options, gate } = await burstNoted(swr());
    cache.delete = () => {
      throw new Error('backend down');
    };
    await expect(invalidate(cache, 'k')).rejects.toThrow('backend down');
    const again = vi.fn(() => 'again');
    expect(await getOrComputeWith(cache, 'k', options, again)).toBe('old');
    expect(again).toHaveBeenCalledTimes(1);
    gate.resolve('new');
    await flush();
  });

  describe('sees, at its next read, a change to the options object', () => {
    it('a grace taken away: the next call waits for the refresh', async () => {
      const { cache, options, gate, refresh } = await burstNoted<{
        ttl: number;
        staleWhileRevalidate: number;
      }>(swr());
      options.staleWhileRevalidate = 0;
      const next = getOrComputeWith(cache, 'k', options, refresh);
      expect(await settled(next)).toBe(false);
      gate.resolve('new');
      expect(await next).toBe('new');
      expect(refresh).toHaveBeenCalledTimes(1);
    });

    it.each([
      [
        'an option misspelt',
        (o: Record<string, unknown>) => Object.assign(o, { stalewhileRevalidate: 1 }),
        TypeError,
        /stalewhileRevalidate/,
      ],
      [
        'a ttl made negative',
        (o: Record<string, unknown>) => Object.assign(o, { ttl: -1 }),
        RangeError,
        /options\.ttl/,
      ],
      [
        'a signal that is not one',
        (o: Record<string, unknown>) => Object.assign(o, { signal: 'stop' }),
        TypeError,
        /options\.signal/,
      ],
    ])('%s: the next call is refused, naming it', async (_name, spoil, type, message) => {
      const { cache, options, gate, refresh } = await burstNoted<Record<string, unknown>>(swr());
      spoil(options);
      const next = getOrComputeWith(cache, 'k', options, refresh);
      await expect(next).rejects.toThrow(type);
      await expect(next).rejects.toThrow(message);
      gate.resolve('new');
      await flush();
    });

    it('an aborted signal added: the next call is rejected with its reason', async () => {
      const { cache, options, gate, refresh } = await burstNoted<{
        ttl: number;
        staleWhileRevalidate: number;
        signal?: AbortSignal;
      }>(swr());
      options.signal = AbortSignal.abort(new Error('left'));
      await expect(getOrComputeWith(cache, 'k', options, refresh)).rejects.toThrow('left');
      gate.resolve('new');
      await flush();
    });
  });

  it('another options object is judged on its own: a checkValue that refuses the stale value waits', async () => {
    const { cache, options, gate, refresh } = await burstNoted(swr());
    const checked = { ...options, checkValue: (value: unknown) => value !== 'old' };
    const next = getOrComputeWith(cache, 'k', checked, refresh);
    expect(await settled(next)).toBe(false);
    gate.resolve('new');
    expect(await next).toBe('new');
  });

  it('at the exact end of the grace, the next read is no longer served stale', async () => {
    const cache = countedCache();
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    const { gate, refresh } = await staleDuringRefresh(cache, options);
    vi.setSystemTime(START + TTL + GRACE - 1);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
    vi.setSystemTime(START + TTL + GRACE);
    const next = getOrComputeWith(cache, 'k', options, refresh);
    expect(await settled(next)).toBe(false);
    gate.resolve('new');
    expect(await next).toBe('new');
  });

  it('a clock set back before the expiry counts the next read a fresh hit, as the full path does', async () => {
    const { cache, options, gate, refresh } = await burstNoted(swr());
    const before = stats();
    vi.setSystemTime(START + TTL - 1);
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('old');
    expect(stats().hits - before.hits).toBe(1);
    expect(stats().staleHits - before.staleHits).toBe(0);
    gate.resolve('new');
    await flush();
  });

  it('once the fill in flight has its value, the next read gets it while the write is on its way', async () => {
    const cache = countedCache({ holdWrites: true });
    const options = { ttl: TTL, staleWhileRevalidate: GRACE };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    cache.writesHeld?.();
    vi.setSystemTime(START + TTL + 1);
    // A caller without grace misses and fills; callers with grace read the stale value meanwhile.
    const gate = deferred<string>();
    const fill = vi.fn(() => gate.promise);
    const missed = getOrComputeWith(cache, 'k', { ttl: TTL }, fill);
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('old');
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('old');
    gate.resolve('new');
    expect(await missed).toBe('new');
    // The fill has its value; its write has not landed, so the count has not moved.
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('new');
    expect(fill).toHaveBeenCalledTimes(1);
    cache.writesHeld?.();
    await flush();
  });

  it('an entry that keeps no settled promise (frozen) is answered with a new promise each call, as a read is', async () => {
    const cache = countedCache();
    const options = swr();
    const now = Date.now();
    await cache.set(
      'k',
      Object.freeze({ value: 'old', createdAt: now - TTL - 1, freshUntil: now - 1, staleUntil: now + GRACE }),
      {
        ttl: undefined,
      },
    );
    const gate = deferred<string>();
    const answers = Array.from({ length: 4 }, () =>
      getOrComputeWith(cache, 'k', options, () => gate.promise),
    );
    expect(new Set(answers).size).toBe(4);
    expect(await Promise.all(answers)).toEqual(['old', 'old', 'old', 'old']);
    gate.resolve('new');
    await flush();
  });

  it('lets go of the note once its refresh has left the registry (it keeps no cache or entry alive)', async () => {
    const { gate, refresh, cache, options } = await burstNoted(swr());
    expect(staleReads.last?.cache).toBe(cache);
    gate.resolve('new');
    await flush();
    // No call has looked at it since: the flight's leaving let it go.
    expect(staleReads.last).toBeUndefined();
    expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('new');
  });
});
