// One options object passed again and again is validated once; changed in place, it is read again.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type GetOrComputeOptions, getOrComputeWith } from '../src/index.js';
import { testCache } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('an options object reused across calls', () => {
  it('a field changed in place takes effect on the next call', async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache();
    const options: { -readonly [K in keyof GetOrComputeOptions]: GetOrComputeOptions[K] } = { ttl: 100 };
    let version = 0;
    const fill = () => ++version;
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe(1);
    options.ttl = '1h';
    await vi.advanceTimersByTimeAsync(150);
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe(2);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe(2);
  });

  it('an invalid value put in later is refused, naming the option', async () => {
    const cache = testCache();
    const options: Record<string, unknown> = { ttl: 100, failSafe: { maxStale: '1h' } };
    await getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1);
    (options.failSafe as Record<string, unknown>).throttle = -5;
    await expect(getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1)).rejects.toThrow(
      /options\.failSafe\.throttle/,
    );
    options.failSafe = undefined;
    options.earlyRefresh = { beta: 0 };
    await expect(getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1)).rejects.toThrow(
      /options\.earlyRefresh\.beta/,
    );
    options.earlyRefresh = undefined;
    options.ttl = 'soon';
    await expect(getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1)).rejects.toThrow(
      /options\.ttl/,
    );
  });

  it('a tag added to the same array is carried by the next fill', async () => {
    const cache = testCache();
    const tags = ['a'];
    const options = { ttl: 60_000, tags };
    await getOrComputeWith(cache, 'one', options, () => 1);
    tags.push('b');
    await getOrComputeWith(cache, 'two', options, () => 2);
    expect(cache.backend.entries.get('one')?.entry.tags).toEqual(['a']);
    expect(cache.backend.entries.get('two')?.entry.tags).toEqual(['a', 'b']);
  });
});
