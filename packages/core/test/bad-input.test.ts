import { describe, expect, it } from 'vitest';
import {
  type Cache,
  getOrCompute,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  jitteredTtl,
  setValue,
} from '../src/index.js';
import { testCache } from './helpers.js';

const fill = () => 1;

describe('bad input is rejected before anything is read or written', () => {
  const cases: [string, (cache: Cache) => Promise<unknown>, ErrorConstructor, RegExp][] = [
    ['empty key', (c) => getOrCompute(c, '', 1_000, fill), TypeError, /key/],
    ['non-string key', (c) => getOrCompute(c, 42 as unknown as string, 1_000, fill), TypeError, /key/],
    ['null key', (c) => getOrCompute(c, null as unknown as string, 1_000, fill), TypeError, /key/],
    [
      'non-function fill',
      (c) => getOrCompute(c, 'k', 1_000, 'x' as unknown as () => number),
      TypeError,
      /fill/,
    ],
    ['negative ttl', (c) => getOrCompute(c, 'k', -1, fill), RangeError, /ttl/],
    ['NaN ttl', (c) => getOrCompute(c, 'k', Number.NaN, fill), RangeError, /ttl/],
    ['Infinity ttl', (c) => getOrCompute(c, 'k', Number.POSITIVE_INFINITY, fill), RangeError, /ttl/],
    ['unparsable ttl', (c) => getOrCompute(c, 'k', '30 parsecs' as '30s', fill), RangeError, /ttl/],
    ['object ttl', (c) => getOrCompute(c, 'k', {} as unknown as number, fill), TypeError, /ttl/],
    [
      'options not an object',
      (c) => getOrComputeWith(c, 'k', null as unknown as object, fill),
      TypeError,
      /options/,
    ],
    [
      'bad staleWhileRevalidate',
      (c) => getOrComputeWith(c, 'k', { staleWhileRevalidate: '-5s' as '5s' }, fill),
      RangeError,
      /staleWhileRevalidate/,
    ],
    ['bad lockTtl', (c) => getOrComputeWith(c, 'k', { lockTtl: 0 }, fill), RangeError, /lockTtl/],
    [
      'bad lockWaitTimeout',
      (c) => getOrComputeWith(c, 'k', { lockWaitTimeout: -1 }, fill),
      RangeError,
      /lockWaitTimeout/,
    ],
    [
      'bad lockPollInterval',
      (c) => getOrComputeWith(c, 'k', { lockPollInterval: 0 }, fill),
      RangeError,
      /lockPollInterval/,
    ],
    [
      'bad fillTimeout',
      (c) => getOrComputeWith(c, 'k', { fillTimeout: 'soon' as '1s' }, fill),
      RangeError,
      /fillTimeout/,
    ],
    [
      'non-boolean lock flag',
      (c) => getOrComputeWith(c, 'k', { distributedFillLock: 'yes' as unknown as boolean }, fill),
      TypeError,
      /distributedFillLock/,
    ],
    [
      'non-signal signal',
      (c) => getOrComputeWith(c, 'k', { signal: {} as AbortSignal }, fill),
      TypeError,
      /signal/,
    ],
    [
      'non-function waitUntil',
      (c) => getOrComputeWith(c, 'k', { waitUntil: 1 as unknown as () => void }, fill),
      TypeError,
      /waitUntil/,
    ],
    ['setValue undefined', (c) => setValue(c, 'k', undefined), TypeError, /value/],
    ['setValue bad ttl', (c) => setValue(c, 'k', 1, { ttl: -1 }), RangeError, /ttl/],
    ['getValue empty key', (c) => getValue(c, ''), TypeError, /key/],
    // A ttl passed where the options go would otherwise store a value that never expires.
    ['setValue ttl in place of options', (c) => setValue(c, 'k', 1, 5_000 as never), TypeError, /options/],
    ['setValue null options', (c) => setValue(c, 'k', 1, null as never), TypeError, /options/],
    ['getValue non-object options', (c) => getValue(c, 'k', true as never), TypeError, /options/],
    [
      'getValue non-boolean allowStale',
      (c) => getValue(c, 'k', { allowStale: 'yes' as never }),
      TypeError,
      /options\.allowStale/,
    ],
    ['invalidate non-string key', (c) => invalidate(c, 1 as unknown as string), TypeError, /key/],
  ];

  it.each(cases)('%s', async (_label, call, type, message) => {
    const cache = testCache();
    const result = call(cache);
    expect(result).toBeInstanceOf(Promise);
    const error = await result.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toMatch(message);
    expect(cache.calls).toEqual({ get: 0, set: 0, delete: 0, lock: 0, release: [] });
  });

  it('inFlightCount rejects what is not an object, naming cache; an unused object has 0', () => {
    expect(() => inFlightCount(undefined as unknown as Cache)).toThrow(
      /cache must be a Cache; got undefined/,
    );
    expect(() => inFlightCount(null as unknown as Cache)).toThrow(TypeError);
    expect(inFlightCount({} as Cache)).toBe(0);
  });

  it('rejects something that is not a Cache, naming it', async () => {
    await expect(getOrCompute(null as unknown as Cache, 'k', 1, fill)).rejects.toThrow(/cache/);
    await expect(getOrCompute({ get() {} } as unknown as Cache, 'k', 1, fill)).rejects.toThrow(/cache\.set/);
  });

  it('jitteredTtl rejects a fraction outside [0, 1] and bad bases', () => {
    expect(() => jitteredTtl(1_000, -0.1)).toThrow(RangeError);
    expect(() => jitteredTtl(1_000, 1.5)).toThrow(/fraction/);
    expect(() => jitteredTtl(1_000, Number.NaN)).toThrow(RangeError);
    expect(() => jitteredTtl(-1, 0.2)).toThrow(/base/);
  });
});
