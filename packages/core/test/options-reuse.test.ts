// One options object passed again and again is validated once; changed in place, it is read again.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type GetOrComputeOptions, getOrComputeWith } from '../src/index.js';
import { testCache } from './helpers.js';

type Bag = Record<string, unknown>;

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

  // Each field, changed in place to a bad value after the object was accepted: the next call reads
  // it again and refuses it (a field the reuse check skipped would keep its old, valid value).
  it.each([
    ['ttl', (o: Bag) => (o.ttl = -1)],
    ['staleWhileRevalidate', (o: Bag) => (o.staleWhileRevalidate = -1)],
    ['distributedFillLock', (o: Bag) => (o.distributedFillLock = 'yes')],
    ['lockTtl', (o: Bag) => (o.lockTtl = 0)],
    ['lockWaitTimeout', (o: Bag) => (o.lockWaitTimeout = -1)],
    ['lockPollInterval', (o: Bag) => (o.lockPollInterval = 0)],
    ['fillTimeout', (o: Bag) => (o.fillTimeout = 0)],
    ['softTimeout', (o: Bag) => (o.softTimeout = -1)],
    ['signal', (o: Bag) => (o.signal = {})],
    ['waitUntil', (o: Bag) => (o.waitUntil = 'later')],
    ['checkValue', (o: Bag) => (o.checkValue = 42)],
    ['tags', (o: Bag) => (o.tags as string[]).push('')],
    ['failSafe.maxStale', (o: Bag) => ((o.failSafe as Bag).maxStale = -1)],
    ['failSafe.throttle', (o: Bag) => ((o.failSafe as Bag).throttle = 0)],
    ['earlyRefresh.beta', (o: Bag) => ((o.earlyRefresh as Bag).beta = 0)],
    // A misspelt option added later: ignored, it would drop the protection it asked for.
    ['fillTimout', (o: Bag) => (o.fillTimout = 5)],
    ['failSafe.maxStal', (o: Bag) => ((o.failSafe as Bag).maxStal = '2h')],
    ['earlyRefresh.bta', (o: Bag) => ((o.earlyRefresh as Bag).bta = 2)],
    // One unknown field in place of a known one that held `undefined`: as many fields as before.
    [
      'distributedFilLock',
      (o: Bag) => {
        delete o.waitUntil;
        o.distributedFilLock = true;
      },
    ],
  ])('%s changed in place to a bad value is refused on the next call, naming it', async (name, change) => {
    const cache = testCache();
    const options: Bag = {
      ttl: 100,
      staleWhileRevalidate: 10,
      distributedFillLock: false,
      lockTtl: 1_000,
      lockWaitTimeout: 1_000,
      lockPollInterval: 10,
      fillTimeout: 1_000,
      softTimeout: 100,
      signal: new AbortController().signal,
      waitUntil: name === 'distributedFilLock' ? undefined : () => {},
      checkValue: () => true,
      tags: ['a'],
      failSafe: { maxStale: '1h', throttle: '1s' },
      earlyRefresh: { beta: 1 },
    };
    await getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1);
    change(options);
    const field = name.replace('.', '\\.');
    await expect(getOrComputeWith(cache, 'k', options as GetOrComputeOptions, () => 1)).rejects.toThrow(
      new RegExp(`options\\.${field}`),
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
