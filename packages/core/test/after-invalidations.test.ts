import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheSetOptions,
  getOrComputeWith,
  invalidateTag,
  resetStats,
  setValue,
  whenIdle,
} from '../src/index.js';
import { deferred, flush, testCache } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
  resetStats();
});

/** A tagging test cache that records the options of every write. */
function recording(name: string) {
  const cache = testCache({ tags: true, name });
  const writes: CacheSetOptions[] = [];
  const set = cache.set.bind(cache);
  cache.set = (key, entry, options) => {
    writes.push(options);
    return set(key, entry, options);
  };
  return { cache, writes };
}

const options = { ttl: 60_000, tags: ['t'] } as const;

describe('CacheSetOptions.afterInvalidations', () => {
  it('is true for a fill that started after every invalidation of its tags, through any cache object', async () => {
    const { cache, writes } = recording('after-1');
    const other = testCache({ tags: true, name: 'after-1-other' });
    await invalidateTag(other, 't');
    await getOrComputeWith(cache, 'k', options, () => 'v');
    expect(writes.at(-1)?.afterInvalidations).toBe(true);
  });

  it('is absent for a fill that started before an invalidation of one of its tags (any cache object)', async () => {
    const { cache, writes } = recording('after-2');
    const other = testCache({ tags: true, name: 'after-2-other' });
    const gate = deferred<string>();
    const filling = getOrComputeWith(cache, 'k', { ttl: 60_000, tags: ['t', 'u'] }, () => gate.promise);
    await flush();
    await invalidateTag(other, 'u'); // another object: this fill is not stopped
    gate.resolve('read before');
    await filling;
    await whenIdle(cache);
    expect(writes.at(-1)?.afterInvalidations).toBeUndefined();
  });

  it('is absent for an untagged fill and for a direct write', async () => {
    const { cache, writes } = recording('after-3');
    await getOrComputeWith(cache, 'plain', { ttl: 60_000 }, () => 'v');
    expect(writes.at(-1)?.afterInvalidations).toBeUndefined();
    await setValue(cache, 'direct', 'v', options);
    expect(writes.at(-1)?.direct).toBe(true);
    expect(writes.at(-1)?.afterInvalidations).toBeUndefined();
  });
});
