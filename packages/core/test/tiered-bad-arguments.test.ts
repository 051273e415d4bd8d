import { expect, it } from 'vitest';
import {
  type CacheEntry,
  type CacheSetOptions,
  createTieredCache,
  type FillLock,
  type FillLockAttempt,
  type TieredCache,
} from '../src/index.js';
import { type Log, localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

// A tiered cache refuses a bad argument itself, before L1, the remote or the bus is touched: its
// remote may not check (a remote the core never calls with a bad argument need not), and a write
// the remote refuses could already have landed in L1 and been published. The conformance suite's
// `checksArguments` cases check the refusals themselves (tiered-conformance.int.test.ts in
// @stampede/redis and @stampede/upstash), but behind a Redis remote that refuses them too; here the
// remote and L1 check nothing and record every call, so a check the tiered cache leaves out shows.

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
 * A tiered cache holding 'kept' (in the remote and in L1), whose remote has a bus, tags, a fill
 * lock (with `commit`), the lock-and-read step and push wake-up, none of them checking its
 * arguments; `untouched` asserts that nothing was read, written or published since `mark`.
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
  const mark = () => {
    before = JSON.stringify({ calls: remote.calls, lockCalls });
    log.length = 0;
  };
  mark();
  const untouched = () => {
    // The log holds every L1 and remote write and every publish.
    expect(log).toEqual([]);
    expect(JSON.stringify({ calls: remote.calls, lockCalls })).toBe(before);
    expect(local.get('kept')).toBe(kept);
    expect(store.read('kept')?.value).toBe('kept');
    expect(store.deletedAt.size).toBe(0);
    expect(store.tagTimes.size).toBe(0);
  };
  return { cache, mark, untouched };
}

type Loose = (...args: unknown[]) => unknown;
const loose =
  (target: object, method: string): Loose =>
  (...args) =>
    ((target as Record<string, Loose>)[method] as Loose).apply(target, args);

/** One bad call of each method: what it passes, the name the refusal gives, and how it comes. */
const BAD_CALLS: readonly (readonly [
  label: string,
  call: (cache: TieredCache, lock: FillLock) => unknown,
  names: RegExp,
  how: 'rejects' | 'throws',
])[] = [
  ['get of a number key', (cache) => loose(cache, 'get')(123), /\bkey\b/, 'rejects'],
  ['set of an empty key', (cache) => loose(cache, 'set')('', entryOf('new'), OPTIONS), /\bkey\b/, 'rejects'],
  [
    'set of an entry without times',
    (cache) => loose(cache, 'set')('kept', { value: 1 }, OPTIONS),
    /\bentry\b/,
    'rejects',
  ],
  [
    'set with a string ttl',
    (cache) => loose(cache, 'set')('kept', entryOf('new'), { ttl: '1h' }),
    /\boptions\b/,
    'rejects',
  ],
  ['delete of a null key', (cache) => loose(cache, 'delete')(null), /\bkey\b/, 'rejects'],
  ['invalidateTags of a string', (cache) => loose(cache, 'invalidateTags')('kept'), /\btags\b/, 'rejects'],
  [
    'tryAcquireFillLock of a number key',
    (cache) => loose(cache, 'tryAcquireFillLock')(7, 1000),
    /\bkey\b/,
    'rejects',
  ],
  [
    'tryAcquireFillLock for a zero ttl',
    (cache) => loose(cache, 'tryAcquireFillLock')('k', 0),
    /\bttl\b/,
    'rejects',
  ],
  [
    'tryAcquireFillLockAndRead of an empty key',
    (cache) => loose(cache, 'tryAcquireFillLockAndRead')('', 1000),
    /\bkey\b/,
    'rejects',
  ],
  [
    'tryAcquireFillLockAndRead for a NaN ttl',
    (cache) => loose(cache, 'tryAcquireFillLockAndRead')('k', Number.NaN),
    /\bttl\b/,
    'rejects',
  ],
  [
    "a lock's commit of a null entry",
    (_, lock) => loose(lock, 'commit')(null, OPTIONS),
    /\bentry\b/,
    'rejects',
  ],
  [
    "a lock's commit without options",
    (_, lock) => loose(lock, 'commit')(entryOf('new')),
    /\boptions\b/,
    'rejects',
  ],
  [
    'onFillDone of a listener that is not a function',
    (cache) => loose(cache, 'onFillDone')('k', 'call me'),
    /\blistener\b/,
    'throws',
  ],
  ['hearsFillDone of a number key', (cache) => loose(cache, 'hearsFillDone')(1), /\bkey\b/, 'throws'],
];

it.each(BAD_CALLS)(
  'refuses %s before L1, the remote or the bus is touched',
  async (_label, call, names, how) => {
    const { cache, mark, untouched } = await tiered();
    const lock = (await cache.tryAcquireFillLock?.('kept', 1000)) as FillLock;
    mark();
    let answer: unknown;
    let error: unknown;
    try {
      answer = call(cache, lock);
    } catch (thrown) {
      error = thrown;
    }
    if (how === 'rejects') {
      // A method that may answer with a promise refuses with one: a caller handles a promise anyway.
      expect(error).toBeUndefined();
      expect(isThenable(answer)).toBe(true);
      error = await Promise.resolve(answer).then(
        () => undefined,
        (reason: unknown) => reason,
      );
    }
    expect(error instanceof TypeError || error instanceof RangeError).toBe(true);
    expect((error as Error).message).toMatch(names);
    untouched();
  },
);
