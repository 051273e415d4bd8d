import { describe, expect, it } from 'vitest';
import {
  type CacheEntry,
  type CacheSetOptions,
  createTieredCache,
  type FillLock,
  type FillLockAttempt,
  type TieredCache,
} from '../src/index.js';
import { type Log, localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

// A tiered cache's own methods, called directly (not through the core, which always passes valid
// arguments): a bad argument is refused with a TypeError (RangeError for a range) naming it, before
// L1, the remote or the bus is touched. A method that may answer with a promise rejects (a miss or
// the remote answers with one: a caller handles a promise either way); `onFillDone` and
// `hearsFillDone`, which answer synchronously, throw.

const HOUR = 3_600_000;
const entryOf = (value: unknown): CacheEntry => {
  const now = Date.now();
  return { value, createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
};
const OPTIONS: CacheSetOptions = { ttl: HOUR };

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as { then?: unknown } | null | undefined)?.then === 'function';

let names = 0;

/**
 * A tiered cache holding 'kept' (in the remote and in L1), whose remote has tags, a fill lock (with
 * `commit`), the lock-and-read step and push wake-up, each counting its calls; `log` records every
 * L1 and remote operation and every publish.
 */
async function tiered() {
  const log: Log = [];
  const store = new RemoteStore();
  const local = localCache(log);
  const remote = remoteCache(store, { log, tags: true });
  const lockCalls = { acquire: 0, acquireAndRead: 0, commit: 0, listen: 0, hears: 0 };
  const lock: FillLock = {
    release: () => undefined,
    commit: async () => {
      lockCalls.commit++;
      return true;
    },
  };
  Object.assign(remote, {
    async tryAcquireFillLock(): Promise<FillLock | undefined> {
      lockCalls.acquire++;
      return lock;
    },
    async tryAcquireFillLockAndRead(): Promise<FillLockAttempt> {
      lockCalls.acquireAndRead++;
      return { lock, entry: undefined };
    },
    onFillDone(): () => void {
      lockCalls.listen++;
      return () => {};
    },
    hearsFillDone(): boolean {
      lockCalls.hears++;
      return false;
    },
  });
  const cache = createTieredCache({ local, remote, name: `tiered-bad-${++names}` });
  await cache.set('kept', entryOf('kept'), OPTIONS);
  const kept = local.get('kept');
  expect(kept?.value).toBe('kept');
  let before = '';
  /** From now on, `untouched` asserts that nothing was read or written anywhere. */
  const mark = () => {
    before = JSON.stringify({ calls: remote.calls, lockCalls });
    log.length = 0;
  };
  mark();
  const untouched = () => {
    expect(log).toEqual([]);
    expect(JSON.stringify({ calls: remote.calls, lockCalls })).toBe(before);
    expect(local.get('kept')).toBe(kept);
    expect(store.read('kept')?.value).toBe('kept');
    expect(store.deletedAt.size).toBe(0);
    expect(store.tagTimes.size).toBe(0);
  };
  return { cache, local, remote, store, lockCalls, mark, untouched };
}

/** Asserts that `answer` is a promise (not a synchronous throw) rejecting with `type` and `message`. */
async function rejects(
  call: () => unknown,
  type: typeof TypeError | typeof RangeError,
  message: string,
): Promise<void> {
  let answer: unknown;
  expect(() => {
    answer = call();
  }).not.toThrow();
  expect(isThenable(answer)).toBe(true);
  const error = await Promise.resolve(answer).then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(type);
  expect((error as Error).message).toContain(message);
}

const BAD_KEYS: readonly [unknown, string][] = [
  [123, 'key must be a non-empty string; got number'],
  ['', 'key must be a non-empty string; got an empty string'],
  [undefined, 'key must be a non-empty string; got undefined'],
  [null, 'key must be a non-empty string; got null'],
];

type Loose = (...args: unknown[]) => unknown;
const loose = (cache: TieredCache, method: keyof TieredCache): Loose => {
  const fn = cache[method] as unknown as Loose;
  return (...args) => fn.apply(cache, args);
};

describe('get', () => {
  it.each(BAD_KEYS)(
    'rejects the key %j with a TypeError naming key, reading nothing',
    async (key, message) => {
      const { cache, untouched } = await tiered();
      await rejects(() => loose(cache, 'get')(key), TypeError, message);
      untouched();
      expect((cache.get('kept') as CacheEntry | undefined)?.value).toBe('kept');
    },
  );
});

describe('delete', () => {
  it.each(BAD_KEYS)('rejects the key %j, deleting and publishing nothing', async (key, message) => {
    const { cache, untouched } = await tiered();
    await rejects(() => loose(cache, 'delete')(key), TypeError, message);
    untouched();
    await cache.delete('kept');
    expect(await cache.get('kept')).toBeUndefined();
  });
});

describe('set', () => {
  const now = Date.now();
  const times = { createdAt: now, freshUntil: now + HOUR, staleUntil: now + HOUR };
  const cases: readonly [string, unknown[], string, typeof TypeError | typeof RangeError][] = [
    ['a number key', [5, entryOf('new'), OPTIONS], 'key must be a non-empty string; got number', TypeError],
    [
      'an empty key',
      ['', entryOf('new'), OPTIONS],
      'key must be a non-empty string; got an empty string',
      TypeError,
    ],
    ['a null entry', ['kept', null, OPTIONS], 'entry must be a CacheEntry object; got null', TypeError],
    [
      'an entry without times',
      ['kept', { value: 1 }, OPTIONS],
      'entry.createdAt must be a number of milliseconds; got undefined',
      TypeError,
    ],
    [
      'an entry with a NaN time',
      ['kept', { ...times, value: 1, staleUntil: Number.NaN }, OPTIONS],
      'entry.staleUntil must be a number of milliseconds; got NaN',
      TypeError,
    ],
    [
      'an entry with tags as a string',
      ['kept', { ...times, value: 1, tags: 'ab' }, OPTIONS],
      'entry.tags must be an array of non-empty strings; got string',
      TypeError,
    ],
    [
      'an entry with a negative delta',
      ['kept', { ...times, value: 1, delta: -5 }, OPTIONS],
      'entry.delta must be >= 0 (milliseconds); got -5',
      RangeError,
    ],
    ['no options', ['kept', entryOf('new')], 'options must be an object; got undefined', TypeError],
    [
      'a string ttl',
      ['kept', entryOf('new'), { ttl: '1h' }],
      'options.ttl must be a number of milliseconds or undefined; got string',
      TypeError,
    ],
    [
      'a numeric direct',
      ['kept', entryOf('new'), { ttl: HOUR, direct: 1 }],
      'options.direct must be a boolean or undefined; got number',
      TypeError,
    ],
  ];
  it.each(cases)('rejects %s, naming it, writing and publishing nothing', async (_, args, message, type) => {
    const { cache, untouched } = await tiered();
    await rejects(() => loose(cache, 'set')(...args), type, message);
    untouched();
  });

  it('still writes after a refused call', async () => {
    const { cache, store, local } = await tiered();
    await expect(loose(cache, 'set')('kept', { value: 'bad' }, OPTIONS)).rejects.toThrow(
      new TypeError('entry.createdAt must be a number of milliseconds; got undefined'),
    );
    const newer = { ...entryOf('newer'), createdAt: Date.now() + 1 };
    expect(await cache.set('kept', newer, OPTIONS)).toBe(true);
    expect(store.read('kept')?.value).toBe('newer');
    expect(local.get('kept')?.value).toBe('newer');
  });
});

describe('invalidateTags', () => {
  const cases: readonly [string, unknown, string][] = [
    ['a string', 'ab', 'tags must be an array of non-empty strings; got string'],
    ['undefined', undefined, 'tags must be an array of non-empty strings; got undefined'],
    ['a list holding a number', [1], 'tags must be an array of non-empty strings; it holds number'],
    [
      'a list holding an empty tag',
      [''],
      'tags must be an array of non-empty strings; it holds an empty string',
    ],
  ];
  it.each(cases)('rejects %s, naming tags, invalidating and publishing nothing', async (_, tags, message) => {
    const { cache, untouched } = await tiered();
    await rejects(() => loose(cache, 'invalidateTags')(tags), TypeError, message);
    untouched();
  });

  it('still invalidates after a refused call', async () => {
    const { cache, store } = await tiered();
    await expect(loose(cache, 'invalidateTags')('ab')).rejects.toThrow(
      new TypeError('tags must be an array of non-empty strings; got string'),
    );
    expect(store.tagTimes.size).toBe(0);
    await cache.invalidateTags?.(['ab']);
    expect([...store.tagTimes.keys()]).toEqual(['ab']);
  });
});

describe.each(['tryAcquireFillLock', 'tryAcquireFillLockAndRead'] as const)('%s', (method) => {
  const cases: readonly [string, unknown[], string, typeof TypeError | typeof RangeError][] = [
    ['a number key', [7, 1000], 'key must be a non-empty string; got number', TypeError],
    ['an empty key', ['', 1000], 'key must be a non-empty string; got an empty string', TypeError],
    [
      'a string ttl',
      ['k', '10s'],
      'ttl must be a finite number of milliseconds (at least 1); got string',
      TypeError,
    ],
    [
      'a missing ttl',
      ['k'],
      'ttl must be a finite number of milliseconds (at least 1); got undefined',
      TypeError,
    ],
    [
      'a negative ttl',
      ['k', -5],
      'ttl must be a finite, non-negative number of milliseconds; got -5',
      RangeError,
    ],
    ['a zero ttl', ['k', 0], 'ttl must be at least 1ms; got 0', RangeError],
    [
      'a NaN ttl',
      ['k', Number.NaN],
      'ttl must be a finite, non-negative number of milliseconds; got NaN',
      RangeError,
    ],
    [
      'an infinite ttl',
      ['k', Number.POSITIVE_INFINITY],
      'ttl must be a finite, non-negative number of milliseconds; got Infinity',
      RangeError,
    ],
  ];
  it.each(cases)('rejects %s, naming it, asking the remote nothing', async (_, args, message, type) => {
    const { cache, untouched } = await tiered();
    await rejects(() => loose(cache, method)(...args), type, message);
    untouched();
  });

  it('still takes the lock after a refused call', async () => {
    const { cache, lockCalls } = await tiered();
    await expect(loose(cache, method)('k', -1)).rejects.toThrow(
      new RangeError('ttl must be a finite, non-negative number of milliseconds; got -1'),
    );
    const answer = await loose(cache, method)('k', 1000);
    expect(answer).toBeDefined();
    expect(lockCalls.acquire + lockCalls.acquireAndRead).toBe(1);
  });
});

describe("a tiered lock's commit", () => {
  // The remote's commit is not the only guard: a commit the remote fails still lands in L1.
  it('rejects a bad entry or options, naming them, before the remote commit and L1', async () => {
    const { cache, local, lockCalls, mark, untouched } = await tiered();
    const lock = (await cache.tryAcquireFillLock?.('kept', 1000)) as FillLock;
    mark();
    const commit = (...args: unknown[]) => (lock.commit as Loose)(...args);
    await rejects(() => commit({ value: 1 }, OPTIONS), TypeError, 'entry.createdAt must be a number');
    await rejects(() => commit(null, OPTIONS), TypeError, 'entry must be a CacheEntry object; got null');
    await rejects(() => commit(entryOf('new'), null), TypeError, 'options must be an object; got null');
    await rejects(() => commit(entryOf('new')), TypeError, 'options must be an object; got undefined');
    untouched();
    // A good commit still goes through, to the remote and into L1.
    const newer = { ...entryOf('newer'), createdAt: Date.now() + 1 };
    expect(await lock.commit?.(newer, OPTIONS)).toBe(true);
    expect(lockCalls.commit).toBe(1);
    expect(local.get('kept')?.value).toBe('newer');
  });
});

describe('onFillDone and hearsFillDone (synchronous: they throw)', () => {
  const listener = () => {};
  const cases: readonly [string, unknown[], string][] = [
    ['a number key', [1, listener], 'key must be a non-empty string; got number'],
    ['an empty key', ['', listener], 'key must be a non-empty string; got an empty string'],
    ['no listener', ['k'], 'listener must be a function; got undefined'],
    ['a listener that is not a function', ['k', 'call me'], 'listener must be a function; got string'],
    [
      'a ready that is not a function',
      ['k', listener, true],
      'ready must be a function or undefined; got boolean',
    ],
  ];
  it.each(cases)('onFillDone refuses %s, naming it, without listening', async (_, args, message) => {
    const { cache, untouched } = await tiered();
    expect(() => loose(cache, 'onFillDone')(...args)).toThrow(new TypeError(message));
    untouched();
    expect(typeof cache.onFillDone?.('k', listener)).toBe('function');
  });

  it.each(BAD_KEYS)('hearsFillDone refuses the key %j, naming it', async (key, message) => {
    const { cache, lockCalls, untouched } = await tiered();
    expect(() => loose(cache, 'hearsFillDone')(key)).toThrow(new TypeError(message));
    untouched();
    expect(cache.hearsFillDone?.('k')).toBe(false);
    expect(lockCalls.hears).toBe(1);
  });
});
