import type { Cache, CacheEntry, CacheSetOptions, FillLock } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry } from '../entries.js';
import { heldLock } from '../fill-done.js';
import { busOf, listenOn, unique } from './bus.js';

// The key every case writes first (or locks) and reads back: a bad call aimed at it, or read by a
// careless adapter as it (`String(['kept'])`), must leave it as it was.
const STORED = 'kept';
// A key nothing writes: a refused write must not create it.
const UNWRITTEN = 'unwritten';
const HOUR = 3_600_000;
const OPTIONS: CacheSetOptions = { ttl: HOUR };
const LOCK_TTL = 5_000;

// What a refusal's message must name: the argument, matched as a word (adapters word the rest).
const KEY = /\bkey\b/i;
const ENTRY = /\bentry\b/i;
const SET_OPTIONS = /\boptions\b/i;
const TAGS = /\btags\b/i;
const TTL = /\bttl\b/i;
const LISTENER = /\blistener\b/i;
const READY = /\bready\b/i;
const MESSAGE = /\bmessage\b/i;
const HANDLERS = /\bhandlers\b/i;

const BAD_KEYS: readonly (readonly [label: string, key: unknown])[] = [
  ['a number key', 123],
  ['an empty key', ''],
  ['an undefined key', undefined],
  ['a null key', null],
  ['an array key holding the stored key', [STORED]],
];

const BAD_LOCK_TTLS: readonly (readonly [label: string, ttl: unknown])[] = [
  ['a string ttl', '10s'],
  ['no ttl', undefined],
  ['a negative ttl', -5],
  ['a zero ttl', 0],
  ['a NaN ttl', Number.NaN],
  ['an infinite ttl', Number.POSITIVE_INFINITY],
];

/** A bad `(entry, options)` pair, made from a good entry newer than the stored one. */
type BadWrite = readonly [label: string, write: (good: CacheEntry) => readonly unknown[], names: RegExp];

// What `set` takes after its key, and a lock's `commit` takes: one table for both.
const BAD_WRITES: readonly BadWrite[] = [
  ['a null entry', () => [null, OPTIONS], ENTRY],
  ['an entry that is a string', (good) => [String(good.value), OPTIONS], ENTRY],
  ['an entry that is an array', (good) => [[good], OPTIONS], ENTRY],
  ['an entry without times', (good) => [{ value: good.value }, OPTIONS], ENTRY],
  ['an entry without a value', ({ value: _, ...times }) => [times, OPTIONS], ENTRY],
  // The time the never-older and delete rules order by: without it every comparison is false.
  ['an entry without createdAt', ({ createdAt: _, ...rest }) => [rest, OPTIONS], ENTRY],
  [
    'an entry with a string createdAt',
    (good) => [{ ...good, createdAt: String(good.createdAt) }, OPTIONS],
    ENTRY,
  ],
  ['an entry with a NaN time', (good) => [{ ...good, freshUntil: Number.NaN }, OPTIONS], ENTRY],
  [
    'an entry with a string time',
    (good) => [{ ...good, staleUntil: String(good.staleUntil) }, OPTIONS],
    ENTRY,
  ],
  ['an entry with a negative delta', (good) => [{ ...good, delta: -1 }, OPTIONS], ENTRY],
  ['an entry whose tags are a string', (good) => [{ ...good, tags: 'ab' }, OPTIONS], ENTRY],
  ['an entry with an empty tag', (good) => [{ ...good, tags: [''] }, OPTIONS], ENTRY],
  ['no options', (good) => [good], SET_OPTIONS],
  ['null options', (good) => [good, null], SET_OPTIONS],
  ['options that are a number', (good) => [good, HOUR], SET_OPTIONS],
  ['options with a string ttl', (good) => [good, { ttl: '1h' }], SET_OPTIONS],
  ['options with a NaN ttl', (good) => [good, { ttl: Number.NaN }], SET_OPTIONS],
  ['options with a string direct', (good) => [good, { ttl: HOUR, direct: 'yes' }], SET_OPTIONS],
  [
    'options with a numeric afterInvalidations',
    (good) => [good, { ttl: HOUR, afterInvalidations: 1 }],
    SET_OPTIONS,
  ],
  [
    'options renewing what is not an entry',
    (good) => [good, { ttl: HOUR, renews: { value: 1 } }],
    SET_OPTIONS,
  ],
];

// A string of tags is the one a careless adapter iterates: 'ab' invalidates 'a' (the stored entry's).
const BAD_TAGS: readonly (readonly [label: string, tags: unknown])[] = [
  ['tags that are a string', 'ab'],
  ['no tags', undefined],
  ['null tags', null],
  ['tags holding a number', [1]],
  ['tags holding an empty tag', ['a', '']],
];

const LOCK_ATTEMPTS: readonly (readonly [label: string, args: readonly unknown[], names: RegExp])[] = [
  ...BAD_KEYS.map(([label, key]) => [label, [key, LOCK_TTL], KEY] as const),
  ...BAD_LOCK_TTLS.map(([label, ttl]) => [label, [STORED, ttl], TTL] as const),
];

const listener = () => {};
const BAD_FILL_DONE: readonly (readonly [label: string, args: readonly unknown[], names: RegExp])[] = [
  ...BAD_KEYS.map(([label, key]) => [label, [key, listener], KEY] as const),
  ['no listener', [STORED], LISTENER],
  ['a listener that is not a function', [STORED, 'call me'], LISTENER],
  ['a ready that is not a function', [STORED, listener, true], READY],
];

const BAD_MESSAGES: readonly (readonly [label: string, message: unknown])[] = [
  ['a number message', 42],
  ['no message', undefined],
  ['a null message', null],
  ['an object message', { text: 'hello' }],
];

const BAD_HANDLERS: readonly (readonly [label: string, handlers: unknown])[] = [
  ['no handlers', undefined],
  ['null handlers', null],
  ['handlers without message', {}],
  ['handlers whose message is not a function', { message: 'hello' }],
  ['handlers whose lost is not a function', { message: listener, lost: true }],
];

type Loose = (...args: unknown[]) => unknown;

/** `target[method]`, callable with arguments its types refuse (as a caller without types can). */
function loose(target: object, method: string): Loose {
  const fn: unknown = (target as Record<string, unknown>)[method];
  if (typeof fn !== 'function') throw new Error(`no ${method}, though the capabilities declare it`);
  return (...args) => (fn as Loose).apply(target, args);
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as { then?: unknown } | null | undefined)?.then === 'function';

/** How a refusal must arrive: thrown by a method that answers synchronously, else a rejection. */
type Refusal = 'throws' | 'rejects';

/**
 * Asserts that `call` is refused as `how` says, with a TypeError or RangeError whose message
 * matches `names`.
 */
async function expectRefused(call: () => unknown, how: Refusal, names: RegExp): Promise<void> {
  let answer: unknown;
  let thrown: { error: unknown } | undefined;
  try {
    answer = call();
  } catch (error) {
    thrown = { error };
  }
  let error: unknown;
  if (how === 'throws') {
    // A promise answered here must not end as an unhandled rejection.
    if (isThenable(answer)) Promise.resolve(answer).catch(() => {});
    expect(thrown, 'a synchronous answer is refused with a throw').toBeDefined();
    error = thrown?.error;
  } else {
    expect(thrown?.error, 'an answer that may be a promise is refused with a rejection, not a throw').toBe(
      undefined,
    );
    expect(isThenable(answer), 'answers with a promise').toBe(true);
    const settled = await Promise.resolve(answer).then(
      () => ({ resolved: true as const }),
      (reason: unknown) => ({ resolved: false as const, reason }),
    );
    expect(settled.resolved, 'the promise rejects').toBe(false);
    error = settled.resolved ? undefined : settled.reason;
  }
  expect(
    error instanceof TypeError || error instanceof RangeError,
    `a TypeError or RangeError; got ${String(error)}`,
  ).toBe(true);
  expect((error as Error).message).toMatch(names);
}

/**
 * Bad arguments, in direct calls of the cache's own methods (the core always passes good ones): each
 * is refused, naming the argument, before anything is read or written; the stored entry reads back
 * as it was, and a good call still works afterwards.
 */
export function argumentCases(ctx: SuiteContext): void {
  const { capabilities } = ctx.options;
  const checks = capabilities.checksArguments === true;
  const { lock, push } = capabilities;
  const extend = lock && capabilities.extend;
  const tags = capabilities.tags === true;
  const lockAndRead = lock && capabilities.lockAndRead === true;
  const commit = lock && capabilities.commit === true;
  const bus = capabilities.bus === true;
  // get, set, delete, invalidateTags, the lock attempts, extend, commit and bus.publish may answer
  // with a promise: a caller handles one either way, so the refusal is one too. A `sync` cache
  // answers them at once, so it throws; onFillDone, hearsFillDone and bus.subscribe always answer
  // at once.
  const later: Refusal = capabilities.sync ? 'throws' : 'rejects';

  /** The stored entry: created a second ago (a refused write's entry is newer), tagged `a`. */
  const stored = (): CacheEntry => {
    const written = entry(STORED, Date.now() - 1_000, HOUR);
    return tags ? { ...written, tags: ['a'] } : written;
  };
  /** A good entry, newer than the stored one. */
  const newer = (value: unknown = 'new'): CacheEntry => entry(value, Date.now(), HOUR);

  /** The current cache, with the stored entry written. */
  const seeded = async (): Promise<Cache> => {
    const cache = ctx.cache();
    await cache.set(STORED, stored(), OPTIONS);
    await expectKept(cache);
    return cache;
  };
  const expectKept = async (cache: Cache): Promise<void> => {
    expect((await cache.get(STORED))?.value, 'the stored entry is as it was').toBe(STORED);
  };
  /** A good write of the stored key lands. */
  const expectWrites = async (cache: Cache): Promise<void> => {
    await cache.set(STORED, newer('rewritten'), OPTIONS);
    expect((await cache.get(STORED))?.value).toBe('rewritten');
  };
  /** The lock of the stored key is free: a good attempt takes it (and lets it go). */
  const expectLockFree = async (cache: Cache): Promise<void> => {
    await (await heldLock(cache, STORED, LOCK_TTL)).release('failed');
  };
  const expectLockHeld = async (cache: Cache): Promise<void> => {
    expect(await cache.tryAcquireFillLock?.(STORED, LOCK_TTL), 'the lock is still held').toBeUndefined();
  };

  it.skipIf(!checks).each(BAD_KEYS)('get refuses %s', async (_label, key) => {
    const cache = await seeded();
    await expectRefused(() => loose(cache, 'get')(key), later, KEY);
    await expectKept(cache);
  });

  it.skipIf(!checks).each(BAD_KEYS)('delete refuses %s, deleting nothing', async (_label, key) => {
    const cache = await seeded();
    await expectRefused(() => loose(cache, 'delete')(key), later, KEY);
    await expectKept(cache);
    await cache.delete(STORED);
    expect(await cache.get(STORED)).toBeUndefined();
  });

  it.skipIf(!checks).each(BAD_KEYS)('set refuses %s, writing nothing', async (_label, key) => {
    const cache = await seeded();
    await expectRefused(() => loose(cache, 'set')(key, newer(), OPTIONS), later, KEY);
    await expectKept(cache);
    await expectWrites(cache);
  });

  it.skipIf(!checks).each(BAD_WRITES)('set refuses %s, writing nothing', async (_label, write, names) => {
    const cache = await seeded();
    const args = write(newer());
    for (const key of [STORED, UNWRITTEN])
      await expectRefused(() => loose(cache, 'set')(key, ...args), later, names);
    await expectKept(cache);
    expect(await cache.get(UNWRITTEN)).toBeUndefined();
    await expectWrites(cache);
  });

  it.skipIf(!checks || !tags).each(BAD_TAGS)(
    'invalidateTags refuses %s, invalidating nothing',
    async (_label, bad) => {
      const cache = await seeded();
      await expectRefused(() => loose(cache, 'invalidateTags')(bad), later, TAGS);
      await expectKept(cache);
      await cache.invalidateTags?.(['a']);
      expect(await cache.get(STORED)).toBeUndefined();
    },
  );

  it.skipIf(!checks || !lock).each(LOCK_ATTEMPTS)(
    'tryAcquireFillLock refuses %s, taking no lock',
    async (_label, args, names) => {
      const cache = await seeded();
      await expectRefused(() => loose(cache, 'tryAcquireFillLock')(...args), later, names);
      await expectLockFree(cache);
      await expectKept(cache);
    },
  );

  it.skipIf(!checks || !lockAndRead).each(LOCK_ATTEMPTS)(
    'tryAcquireFillLockAndRead refuses %s, taking no lock',
    async (_label, args, names) => {
      const cache = await seeded();
      await expectRefused(() => loose(cache, 'tryAcquireFillLockAndRead')(...args), later, names);
      const attempt = await cache.tryAcquireFillLockAndRead?.(STORED, LOCK_TTL);
      expect(attempt?.lock, 'a good attempt takes the lock').toBeDefined();
      expect(attempt?.entry?.value).toBe(STORED);
      await attempt?.lock?.release('failed');
    },
  );

  it.skipIf(!checks || !extend).each(BAD_LOCK_TTLS)(
    "a lock's extend refuses %s, leaving the lock as it was",
    async (_label, ttl) => {
      const cache = await seeded();
      const held = await heldLock(cache, STORED, LOCK_TTL);
      await expectRefused(() => loose(held, 'extend')(ttl), later, TTL);
      // Not ended (a TTL of 0 or NaN would end it at once) and still the holder's own.
      await expectLockHeld(cache);
      expect(await held.extend?.(LOCK_TTL)).toBe(true);
      await held.release('failed');
      await expectLockFree(cache);
    },
  );

  it.skipIf(!checks || !commit).each(BAD_WRITES)(
    "a lock's commit refuses %s, writing nothing and keeping the lock",
    async (_label, write, names) => {
      const cache = await seeded();
      const held: FillLock = await heldLock(cache, STORED, LOCK_TTL);
      await expectRefused(() => loose(held, 'commit')(...write(newer())), later, names);
      await expectKept(cache);
      await expectLockHeld(cache);
      // A good commit still writes, and releases the lock.
      await held.commit?.(newer('committed'), OPTIONS);
      expect((await cache.get(STORED))?.value).toBe('committed');
      await expectLockFree(cache);
    },
  );

  it.skipIf(!checks || !push).each(BAD_FILL_DONE)('onFillDone throws for %s', async (_label, args, names) => {
    const cache = ctx.cache();
    await expectRefused(() => loose(cache, 'onFillDone')(...args), 'throws', names);
    const stop = cache.onFillDone?.(STORED, listener);
    expect(typeof stop, 'a good call still listens').toBe('function');
    stop?.();
  });

  it.skipIf(!checks || !push).for(BAD_KEYS)('hearsFillDone throws for %s', async ([, key], { skip }) => {
    const cache = ctx.cache();
    // Optional alongside onFillDone.
    if (cache.hearsFillDone === undefined) return skip('no hearsFillDone (optional)');
    await expectRefused(() => loose(cache, 'hearsFillDone')(key), 'throws', KEY);
    expect(typeof cache.hearsFillDone(STORED)).toBe('boolean');
  });

  it.skipIf(!checks || !bus).each(BAD_MESSAGES)(
    'bus.publish refuses %s, publishing nothing',
    async (_label, message) => {
      const cache = ctx.cache();
      const subscriber = await listenOn(ctx, cache);
      try {
        await expectRefused(() => loose(busOf(cache), 'publish')(message), later, MESSAGE);
        // Published after the refused call on the same bus: once it is heard, the other would have been.
        const good = unique('after a refused publish');
        await busOf(cache).publish(good);
        expect(await ctx.until(() => subscriber.heard.includes(good))).toBe(true);
        expect(subscriber.heard).toEqual([good]);
      } finally {
        subscriber.stop();
      }
    },
  );

  it.skipIf(!checks || !bus).each(BAD_HANDLERS)('bus.subscribe throws for %s', async (_label, handlers) => {
    const cache = ctx.cache();
    await expectRefused(() => loose(busOf(cache), 'subscribe')(handlers), 'throws', HANDLERS);
    const subscriber = await listenOn(ctx, cache);
    try {
      const good = unique('after a refused subscribe');
      await busOf(cache).publish(good);
      expect(await ctx.until(() => subscriber.heard.includes(good))).toBe(true);
    } finally {
      subscriber.stop();
    }
  });
}
