import { describe, expect, it } from 'vitest';
import {
  type CacheEntry,
  checkBusHandlers,
  checkBusMessage,
  checkCacheEntry,
  checkCacheKey,
  checkCacheSetOptions,
  checkCacheWrite,
  checkFillDoneArguments,
  checkLockTtl,
  checkTagList,
} from '../src/adapter.js';

// The adapter kit's argument checks, which every adapter's own `Cache` methods (and a tiered
// cache's) run before they read or write: the one place their exact messages and error classes are
// asserted. That each adapter runs them, refuses in the right way and writes nothing is checked by
// the conformance suite's `checksArguments` cases.

type ErrorClass = typeof TypeError | typeof RangeError;

/** Asserts that `call` throws exactly `type` (not a subclass) with exactly `message`. */
function expectThrows(call: () => unknown, type: ErrorClass, message: string): void {
  let error: unknown;
  try {
    call();
  } catch (caught) {
    error = caught;
  }
  expect(error, 'it throws').toBeDefined();
  expect((error as Error).constructor).toBe(type);
  expect((error as Error).message).toBe(message);
}

const HOUR = 3_600_000;
const now = 1_700_000_000_000;
const times = { createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
const good: CacheEntry = { value: 'v', ...times };
const listener = () => {};

describe('checkCacheKey', () => {
  it.each([
    [123, 'key must be a non-empty string; got number'],
    ['', 'key must be a non-empty string; got an empty string'],
    [undefined, 'key must be a non-empty string; got undefined'],
    [null, 'key must be a non-empty string; got null'],
    [['k'], 'key must be a non-empty string; got array'],
    [{}, 'key must be a non-empty string; got object'],
  ])('refuses %j: %s', (key, message) => {
    expectThrows(() => checkCacheKey(key), TypeError, message);
  });

  it('names the argument as asked, and accepts any non-empty string', () => {
    expectThrows(
      () => checkCacheKey(1, 'prefix'),
      TypeError,
      'prefix must be a non-empty string; got number',
    );
    for (const key of ['k', ' ', '{}', 'k'.repeat(1_000)]) expect(() => checkCacheKey(key)).not.toThrow();
  });
});

describe('checkCacheEntry', () => {
  it.each([
    ['null', null, 'entry must be a CacheEntry object; got null', TypeError],
    ['a string', 'v', 'entry must be a CacheEntry object; got string', TypeError],
    ['an array', [], 'entry must be a CacheEntry object; got array', TypeError],
    [
      'without times',
      { value: 1 },
      'entry.createdAt must be a number of milliseconds; got undefined',
      TypeError,
    ],
    [
      'without a value',
      { ...times },
      'entry.value must not be undefined (undefined is never cached; null is a value)',
      TypeError,
    ],
    [
      'with a NaN time',
      { ...times, value: 1, freshUntil: Number.NaN },
      'entry.freshUntil must be a number of milliseconds; got NaN',
      TypeError,
    ],
    [
      'with a string time',
      { ...times, value: 1, staleUntil: '9' },
      'entry.staleUntil must be a number of milliseconds; got string',
      TypeError,
    ],
    [
      'with a string delta',
      { ...times, value: 1, delta: '5' },
      'entry.delta must be a number of milliseconds; got string',
      TypeError,
    ],
    [
      'with a negative delta',
      { ...times, value: 1, delta: -1 },
      'entry.delta must be >= 0 (milliseconds); got -1',
      RangeError,
    ],
    [
      'with tags as a string',
      { ...times, value: 1, tags: 'ab' },
      'entry.tags must be an array of non-empty strings; got string',
      TypeError,
    ],
    [
      'with an empty tag',
      { ...times, value: 1, tags: [''] },
      'entry.tags must be an array of non-empty strings; it holds an empty string',
      TypeError,
    ],
    [
      'with a number tag',
      { ...times, value: 1, tags: ['a', 2] },
      'entry.tags must be an array of non-empty strings; it holds number',
      TypeError,
    ],
  ] as const)('refuses an entry %s', (_, entry, message, type) => {
    expectThrows(() => checkCacheEntry(entry), type, message);
  });

  it('names the argument as asked', () => {
    expectThrows(
      () => checkCacheEntry({ value: 1 }, 'options.renews'),
      TypeError,
      'options.renews.createdAt must be a number of milliseconds; got undefined',
    );
  });

  it('accepts what the contract allows: null as a value, Infinity as never, a delta of 0, its own fields', () => {
    for (const entry of [
      good,
      {
        value: null,
        createdAt: 1,
        freshUntil: Number.POSITIVE_INFINITY,
        staleUntil: Number.POSITIVE_INFINITY,
      },
      { ...good, value: 0, delta: 0, tags: [] },
      { ...good, value: false, delta: undefined, tags: undefined },
      { ...good, tags: ['a', 'a'], storedBy: 'an adapter' },
    ]) {
      expect(() => checkCacheEntry(entry)).not.toThrow();
    }
  });
});

describe('checkCacheSetOptions', () => {
  it.each([
    ['missing', undefined, 'options must be an object; got undefined'],
    ['null', null, 'options must be an object; got null'],
    ['a number', 1000, 'options must be an object; got number'],
    ['an array', [], 'options must be an object; got array'],
    [
      'with a string ttl',
      { ttl: '1s' },
      'options.ttl must be a number of milliseconds or undefined; got string',
    ],
    [
      'with a NaN ttl',
      { ttl: Number.NaN },
      'options.ttl must be a number of milliseconds or undefined; got NaN',
    ],
    [
      'with a string direct',
      { ttl: 1000, direct: 'yes' },
      'options.direct must be a boolean or undefined; got string',
    ],
    [
      'with a numeric afterInvalidations',
      { ttl: 1000, afterInvalidations: 1 },
      'options.afterInvalidations must be a boolean or undefined; got number',
    ],
    [
      'renewing what is not an entry',
      { ttl: 1000, renews: 1 },
      'options.renews must be a CacheEntry object; got number',
    ],
    [
      'renewing a malformed entry',
      { ttl: 1000, renews: { value: 1 } },
      'options.renews.createdAt must be a number of milliseconds; got undefined',
    ],
  ])('refuses options %s', (_, options, message) => {
    expectThrows(() => checkCacheSetOptions(options), TypeError, message);
  });

  it('accepts what the contract allows: no ttl, an expired or endless one, names from a newer core', () => {
    for (const options of [
      { ttl: undefined },
      { ttl: 0 },
      { ttl: -1 },
      { ttl: Number.POSITIVE_INFINITY },
      { ttl: HOUR, direct: true, afterInvalidations: false, renews: good },
      { ttl: HOUR, extra: true },
    ]) {
      expect(() => checkCacheSetOptions(options)).not.toThrow();
    }
  });
});

describe('checkCacheWrite', () => {
  it('checks the entry, then the options', () => {
    expectThrows(() => checkCacheWrite(null, null), TypeError, 'entry must be a CacheEntry object; got null');
    expectThrows(() => checkCacheWrite(good, null), TypeError, 'options must be an object; got null');
    expect(() => checkCacheWrite(good, { ttl: HOUR })).not.toThrow();
  });
});

describe('checkTagList', () => {
  it.each([
    ['a string', 'ab', 'tags must be an array of non-empty strings; got string'],
    ['undefined', undefined, 'tags must be an array of non-empty strings; got undefined'],
    ['null', null, 'tags must be an array of non-empty strings; got null'],
    ['a list holding a number', [1], 'tags must be an array of non-empty strings; it holds number'],
    [
      'a list holding an empty tag',
      ['a', ''],
      'tags must be an array of non-empty strings; it holds an empty string',
    ],
  ])('refuses %s', (_, tags, message) => {
    expectThrows(() => checkTagList(tags), TypeError, message);
  });

  it('accepts a list of tags, an empty one too', () => {
    for (const tags of [[], ['a'], ['a', 'a', 'b']]) expect(() => checkTagList(tags)).not.toThrow();
  });
});

describe('checkLockTtl', () => {
  it.each([
    ['a string', '10s', 'ttl must be a finite number of milliseconds (at least 1); got string', TypeError],
    [
      'undefined',
      undefined,
      'ttl must be a finite number of milliseconds (at least 1); got undefined',
      TypeError,
    ],
    [
      'a negative number',
      -5,
      'ttl must be a finite, non-negative number of milliseconds; got -5',
      RangeError,
    ],
    ['zero', 0, 'ttl must be at least 1ms; got 0', RangeError],
    ['below 1 ms', 0.5, 'ttl must be at least 1ms; got 0.5', RangeError],
    ['NaN', Number.NaN, 'ttl must be a finite, non-negative number of milliseconds; got NaN', RangeError],
    [
      'Infinity',
      Number.POSITIVE_INFINITY,
      'ttl must be a finite, non-negative number of milliseconds; got Infinity',
      RangeError,
    ],
  ] as const)('refuses %s', (_, ttl, message, type) => {
    expectThrows(() => checkLockTtl(ttl), type, message);
  });

  it('names the argument as asked, and accepts 1 ms and more', () => {
    expectThrows(
      () => checkLockTtl('5s', 'lockTtl'),
      TypeError,
      'lockTtl must be a finite number of milliseconds (at least 1); got string',
    );
    for (const ttl of [1, 1.5, 5_000, HOUR]) expect(() => checkLockTtl(ttl)).not.toThrow();
  });
});

describe('checkFillDoneArguments', () => {
  it.each([
    ['a number key', [1, listener], 'key must be a non-empty string; got number'],
    ['an empty key', ['', listener], 'key must be a non-empty string; got an empty string'],
    ['no listener', ['k'], 'listener must be a function; got undefined'],
    ['a listener that is not a function', ['k', 'call me'], 'listener must be a function; got string'],
    [
      'a ready that is not a function',
      ['k', listener, true],
      'ready must be a function or undefined; got boolean',
    ],
  ] as const)('refuses %s', (_, args, message) => {
    expectThrows(() => (checkFillDoneArguments as (...args: unknown[]) => void)(...args), TypeError, message);
  });

  it('accepts a key and a listener, with or without ready', () => {
    expect(() => checkFillDoneArguments('k', listener)).not.toThrow();
    expect(() => checkFillDoneArguments('k', listener, listener)).not.toThrow();
  });
});

describe('checkBusMessage', () => {
  it.each([
    [42, 'message must be a string; got number'],
    [undefined, 'message must be a string; got undefined'],
    [null, 'message must be a string; got null'],
    [{ text: 'x' }, 'message must be a string; got object'],
  ])('refuses %j', (message, text) => {
    expectThrows(() => checkBusMessage(message), TypeError, text);
  });

  it('accepts any string', () => {
    for (const message of ['', 'k|evict', 'ünïcødé\nline'])
      expect(() => checkBusMessage(message)).not.toThrow();
  });
});

describe('checkBusHandlers', () => {
  it.each([
    ['undefined', undefined, 'handlers must be an object of functions; got undefined'],
    ['null', null, 'handlers must be an object of functions; got null'],
    ['an array', [listener], 'handlers must be an object of functions; got array'],
    ['without message', {}, 'handlers.message must be a function; got undefined'],
    [
      'with a message that is not a function',
      { message: 'x' },
      'handlers.message must be a function; got string',
    ],
    [
      'with a subscribed that is not a function',
      { message: listener, subscribed: 1 },
      'handlers.subscribed must be a function or undefined; got number',
    ],
    [
      'with a lost that is not a function',
      { message: listener, lost: true },
      'handlers.lost must be a function or undefined; got boolean',
    ],
  ])('refuses handlers %s', (_, handlers, message) => {
    expectThrows(() => checkBusHandlers(handlers), TypeError, message);
  });

  it('accepts a message handler, with or without subscribed and lost', () => {
    expect(() => checkBusHandlers({ message: listener })).not.toThrow();
    expect(() => checkBusHandlers({ message: listener, subscribed: listener, lost: listener })).not.toThrow();
  });
});
