import { beforeEach, describe, expect, it } from 'vitest';
import {
  type Cache,
  getOrCompute,
  getOrComputeWith,
  getValue,
  invalidate,
  invalidateTags,
  resetStats,
  setValue,
  stats,
} from '../src/index.js';
import { Backend, deferred, flush, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
});

describe('invalidation and plain values', () => {
  it('invalidating during a fill: its callers still get the result, but it is not written', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const before = getOrCompute(cache, 'k', 60_000, () => gate.promise);
    await invalidate(cache, 'k');
    gate.resolve('computed before the invalidation');
    expect(await before).toBe('computed before the invalidation');
    await flush();
    expect(cache.backend.entries.has('k')).toBe(false);
    expect(await getValue(cache, 'k')).toBeUndefined();
  });

  it('after an invalidation new callers start a new fill instead of joining the old one', async () => {
    const cache = testCache();
    const old = deferred<string>();
    const first = getOrCompute(cache, 'k', 60_000, () => old.promise);
    await invalidate(cache, 'k');
    const second = getOrCompute(cache, 'k', 60_000, async () => 'new');
    expect(await second).toBe('new');
    old.resolve('old');
    expect(await first).toBe('old');
    await flush();
    expect(await getValue(cache, 'k')).toBe('new');
    expect(stats().fills).toBe(2);
  });

  it('setValue during a fill wins over the older fill', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const filling = getOrCompute(cache, 'k', 60_000, () => gate.promise);
    await setValue(cache, 'k', 'set by hand', { ttl: 60_000 });
    gate.resolve('from the fill');
    expect(await filling).toBe('from the fill');
    await flush();
    expect(await getValue(cache, 'k')).toBe('set by hand');
  });

  it('getValue and setValue agree with getOrCompute', async () => {
    const cache = testCache({ async: true });
    await setValue(cache, 'k', { n: 1 }, { ttl: '1m' });
    expect(await getOrCompute(cache, 'k', '1m', () => ({ n: 2 }))).toEqual({ n: 1 });
    await getOrCompute(cache, 'other', undefined, () => 'x');
    expect(await getValue(cache, 'other')).toBe('x');
    expect(await getValue(cache, 'missing')).toBeUndefined();
    await expect(setValue(cache, 'k', undefined)).rejects.toThrow(TypeError);
  });

  it('a failing delete rejects and is counted', async () => {
    const cache = testCache();
    cache.delete = () => {
      throw new Error('backend down');
    };
    await expect(invalidate(cache, 'k')).rejects.toThrow('backend down');
    expect(stats().backendErrors).toBe(1);
  });
});

/**
 * A cache whose reads see the store as it was when they were sent and answer only when released,
 * as a remote store's replies do: a read sent before a write can answer with the older entry.
 */
function slowReads(tags = false) {
  const backend = new Backend();
  const base = testCache({ backend, tags });
  const pending: (() => void)[] = [];
  const cache: Cache = {
    ...base,
    get(key: string) {
      const seen = backend.read(key);
      return new Promise((resolve) => pending.push(() => resolve(seen)));
    },
  };
  const answerReads = () => {
    for (const answer of pending.splice(0)) answer();
  };
  return { cache, answerReads };
}

describe('a read in flight across a change of its key', () => {
  it.each([
    ['setValue', (cache: Cache) => setValue(cache, 'k', 'new', { ttl: 60_000 }), 'new'],
    ['invalidate', (cache: Cache) => invalidate(cache, 'k'), 'filled after'],
  ])('is not shared with a call made after %s resolved', async (_name, change, expected) => {
    const { cache, answerReads } = slowReads();
    await setValue(cache, 'k', 'old', { ttl: 60_000 });
    const before = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'filled before');
    await flush();
    await change(cache);
    // Made after the change resolved: it must read again, not take the read sent before it.
    const after = getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'filled after');
    await flush();
    answerReads();
    await flush();
    answerReads();
    expect(await before).toBe('old');
    expect(await after).toBe(expected);
  });

  it('is not shared with a call made after invalidateTags resolved', async () => {
    const { cache, answerReads } = slowReads(true);
    await setValue(cache, 'k', 'old', { ttl: 60_000, tags: ['t'] });
    const before = getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['t'] }, () => 'filled before');
    await flush();
    await invalidateTags(cache, ['t']);
    const after = getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['t'] }, () => 'filled after');
    await flush();
    answerReads();
    await flush();
    answerReads();
    expect(await before).toBe('old');
    expect(await after).toBe('filled after');
  });
});
