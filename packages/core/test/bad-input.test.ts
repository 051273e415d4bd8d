import { describe, expect, it } from 'vitest';
import { createEntry, reportBackendError } from '../src/adapter.js';
import {
  type BackendOperation,
  type Cache,
  configure,
  createTieredCache,
  getOrCompute,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  jitteredTtl,
  STAT_NAMES,
  setValue,
  statsByCache,
  whenIdle,
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
    // 0 would time every asynchronous fill out at once: a likely misreading of "no limit".
    ['fillTimeout 0', (c) => getOrComputeWith(c, 'k', { fillTimeout: 0 }, fill), RangeError, /fillTimeout/],
    [
      'fillTimeout 0.5',
      (c) => getOrComputeWith(c, 'k', { fillTimeout: 0.5 }, fill),
      RangeError,
      /fillTimeout/,
    ],
    // An array passes typeof as an object, and with no option names would read as no options.
    [
      'options an array',
      (c) => getOrComputeWith(c, 'k', [] as never, fill),
      TypeError,
      /options must be an object; got array/,
    ],
    [
      'failSafe an array',
      (c) => getOrComputeWith(c, 'k', { failSafe: [] as never }, fill),
      TypeError,
      /options\.failSafe must be an object; got array/,
    ],
    [
      'setValue options an array',
      (c) => setValue(c, 'k', 1, [] as never),
      TypeError,
      /options must be an object; got array/,
    ],
    [
      'null ttl, named as null',
      (c) => getOrComputeWith(c, 'k', { ttl: null as never }, fill),
      TypeError,
      /options\.ttl .*; got null/,
    ],
    [
      'non-boolean lock flag',
      (c) => getOrComputeWith(c, 'k', { distributedFillLock: 'yes' as unknown as boolean }, fill),
      TypeError,
      /distributedFillLock/,
    ],
    [
      'null lock flag (it used to read as false: the lock asked for was silently absent)',
      (c) => getOrComputeWith(c, 'k', { distributedFillLock: null as unknown as boolean }, fill),
      TypeError,
      /options\.distributedFillLock must be a boolean; got null/,
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

  it("the adapter kit's createEntry rejects a time or delta that is not a number, naming it", () => {
    const now = 1_000_000;
    expect(() => createEntry('v', Number.NaN, now, now)).toThrow(/createdAt must be a number.*NaN/);
    expect(() => createEntry('v', now, Number.NaN, now)).toThrow(TypeError);
    expect(() => createEntry('v', now, now, '5' as unknown as number)).toThrow(/staleUntil.*got string/);
    expect(() => createEntry('v', now, now, now, Number.NaN)).toThrow(/delta must be a number/);
    expect(() => createEntry('v', now, now, now, -1)).toThrow(RangeError);
    // Never (Infinity) and a zero delta are valid.
    const entry = createEntry('v', now, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, 0);
    expect(entry).toEqual({
      value: 'v',
      createdAt: now,
      freshUntil: Number.POSITIVE_INFINITY,
      staleUntil: Number.POSITIVE_INFINITY,
      delta: 0,
    });
  });

  it('a cache named by an empty string (or not a string) is refused, naming cache.name', async () => {
    const unnamed = { ...testCache(), name: '' };
    await expect(getOrCompute(unnamed, 'k', 1_000, fill)).rejects.toThrow(
      /cache\.name must be a non-empty string when present; got ''/,
    );
    const numbered = { ...testCache(), name: 42 as unknown as string };
    await expect(getOrCompute(numbered, 'k', 1_000, fill)).rejects.toThrow(/cache\.name .*got number/);
    expect(Object.keys(statsByCache())).not.toContain('');
  });

  it("the adapter kit's reportBackendError names a bad cacheName, operation or key, and counts nothing", () => {
    const before = statsByCache()['kit-check']?.backendErrors ?? 0;
    const fault = new Error('down');
    expect(() => reportBackendError('', 'get', 'k', fault)).toThrow(/cacheName must be a non-empty string/);
    expect(() => reportBackendError(42 as unknown as string, 'get', 'k', fault)).toThrow(
      /cacheName .*number/,
    );
    expect(() => reportBackendError('kit-check', 'fetch' as BackendOperation, 'k', fault)).toThrow(
      /operation must be one of get, set, .*; got 'fetch'/,
    );
    expect(() => reportBackendError('kit-check', 'get', 7 as unknown as string, fault)).toThrow(
      /key must be a string or undefined; got number/,
    );
    expect(statsByCache()['kit-check']?.backendErrors ?? 0).toBe(before);
    reportBackendError('kit-check', 'warm-up', undefined, fault);
    expect(statsByCache()['kit-check']?.backendErrors).toBe(before + 1);
  });

  it('STAT_NAMES cannot be changed by a caller', () => {
    expect(Object.isFrozen(STAT_NAMES)).toBe(true);
    expect(() => (STAT_NAMES as string[]).push('x')).toThrow(TypeError);
  });
});

// Options built in a variable or read from a config file escape TypeScript's excess-property check:
// a misspelt name used to be ignored, and the protection it asked for (the fleet's lock, SWR,
// fail-safe) silently absent.
describe('a misspelt option is a TypeError naming it, not ignored', () => {
  const loose = (options: object) => options as never;
  const cases: [string, () => unknown, string][] = [
    [
      'getOrComputeWith',
      () => getOrComputeWith(testCache(), 'k', loose({ ttl: 1_000, distributedFilLock: true }), fill),
      "options.distributedFilLock is not an option (did you mean 'distributedFillLock'?)",
    ],
    [
      'getOrComputeWith, another case',
      () => getOrComputeWith(testCache(), 'k', loose({ ttl: 1_000, failsafe: true }), fill),
      "options.failsafe is not an option (did you mean 'failSafe'?)",
    ],
    [
      'failSafe',
      () => getOrComputeWith(testCache(), 'k', loose({ failSafe: { maxStal: '1h' } }), fill),
      "options.failSafe.maxStal is not an option (did you mean 'maxStale'?)",
    ],
    [
      'earlyRefresh',
      () => getOrComputeWith(testCache(), 'k', loose({ earlyRefresh: { bta: 2 } }), fill),
      "options.earlyRefresh.bta is not an option (did you mean 'beta'?)",
    ],
    [
      'getValue',
      () => getValue(testCache(), 'k', loose({ stale: true })),
      'options.stale is not an option (known: allowStale, checkValue)',
    ],
    [
      'setValue',
      () => setValue(testCache(), 'k', 1, loose({ ttl: 1_000, swr: 5 })),
      'options.swr is not an option (known: ttl, staleWhileRevalidate, tags)',
    ],
    [
      'configure',
      () => configure(loose({ maxBackgroundRefresh: 3 })),
      "config.maxBackgroundRefresh is not an option (did you mean 'maxBackgroundRefreshes'?)",
    ],
    [
      'createTieredCache',
      () => createTieredCache(loose({ local: testCache(), remote: testCache(), localTTL: 5 })),
      "options.localTTL is not an option (did you mean 'localTtl'?)",
    ],
    [
      'whenIdle',
      () => whenIdle(testCache(), loose({ timout: 5 })),
      "options.timout is not an option (did you mean 'timeout'?)",
    ],
  ];

  it.each(cases)('%s', async (_, call, message) => {
    let thrown: unknown;
    try {
      await call();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect((thrown as Error).message).toBe(message);
  });

  it('nothing was read or written, and known options holding undefined are fine', async () => {
    const cache = testCache();
    await expect(
      getOrComputeWith(cache, 'k', loose({ ttl: 1_000, distributedFilLock: true }), fill),
    ).rejects.toThrow(TypeError);
    expect(cache.calls.get + cache.calls.set).toBe(0);
    expect(
      await getOrComputeWith(cache, 'k', { ttl: undefined, signal: undefined, tags: undefined }, fill),
    ).toBe(1);
  });

  it('a name inherited from a prototype is not an option the caller wrote', async () => {
    const options = Object.assign(Object.create({ inherited: true }) as object, { ttl: 1_000 });
    expect(await getOrComputeWith(testCache(), 'k', options, fill)).toBe(1);
  });
});
