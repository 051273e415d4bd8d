import * as v from 'valibot';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  type CacheEntry,
  CacheFillError,
  type CheckValueEvent,
  configure,
  getOrCompute,
  getOrComputeWith,
  getValue,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  type StandardSchemaV1,
  setValue,
  stats,
} from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';

const User = z.object({ id: z.string(), name: z.string() });
const UserV = v.object({ id: v.string(), name: v.string() });

let events: StampedeEvent[] = [];
let off: () => void = () => {};

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
  events = [];
  off = onStampedeEvent((event) => events.push(event));
});
afterEach(() => {
  off();
  vi.useRealTimers();
});

function checkEvents(): CheckValueEvent[] {
  return events.filter((event): event is CheckValueEvent => event.type === 'check-value');
}

describe('checkValue on a cached value', () => {
  it.each([
    ['zod', User],
    ['valibot', UserV],
  ] as const)(
    'an old-shape entry written by other code is a miss, refilled and counted (%s)',
    async (_name, schema) => {
      const cache = testCache({ async: true });
      // What the previous deploy wrote: no `name`, a numeric id.
      await setValue(cache, 'user:1', { id: 1, fullName: 'Ada' }, { ttl: '1h' });
      const fill = vi.fn(() => ({ id: '1', name: 'Ada' }));
      const user = await getOrComputeWith(cache, 'user:1', { ttl: '1h', checkValue: schema }, fill);
      expect(user).toEqual({ id: '1', name: 'Ada' });
      expect(fill).toHaveBeenCalledTimes(1);
      expect(stats().checkValueFailures).toBe(1);
      expect(stats().misses).toBe(1);
      expect(checkEvents()).toHaveLength(1);
      expect(checkEvents()[0]).toMatchObject({ cache: 'test', key: 'user:1', source: 'cache' });
      expect(checkEvents()[0]?.issues.length).toBeGreaterThan(0);
      // The refilled value replaced the old one: the next call is a plain hit.
      await vi.advanceTimersByTimeAsync(0);
      const again = await getOrComputeWith(cache, 'user:1', { ttl: '1h', checkValue: schema }, fill);
      expect(again).toEqual({ id: '1', name: 'Ada' });
      expect(fill).toHaveBeenCalledTimes(1);
      expect(stats().hits).toBe(1);
      expect(stats().checkValueFailures).toBe(1);
    },
  );

  it('a value that passes is a hit and the fill does not run', async () => {
    const cache = testCache();
    await setValue(cache, 'k', { id: 'a', name: 'b' });
    const fill = vi.fn(() => ({ id: 'x', name: 'y' }));
    expect(await getOrComputeWith(cache, 'k', { checkValue: User }, fill)).toEqual({ id: 'a', name: 'b' });
    expect(fill).not.toHaveBeenCalled();
    expect(stats().checkValueFailures).toBe(0);
  });

  it("hands out the schema's output (a transform) while the cache keeps the fill's value", async () => {
    const cache = testCache();
    const Upper = z.string().transform((text) => text.toUpperCase());
    const first = await getOrComputeWith(cache, 'k', { checkValue: Upper }, () => 'abc');
    expect(first).toBe('ABC');
    expect(cache.backend.read('k')?.value).toBe('abc');
    expect(await getOrComputeWith(cache, 'k', { checkValue: Upper }, () => 'zzz')).toBe('ABC');
  });

  it('the function form: true passes, false and a message fail', async () => {
    const cache = testCache();
    await setValue(cache, 'a', 1);
    await setValue(cache, 'b', 2);
    const even = (value: unknown) => (typeof value === 'number' && value % 2 === 0) || 'not even';
    expect(await getOrComputeWith(cache, 'b', { checkValue: even }, () => 4)).toBe(2);
    expect(await getOrComputeWith(cache, 'a', { checkValue: even }, () => 4)).toBe(4);
    expect(checkEvents()[0]?.issues).toEqual([{ message: 'not even' }]);
    await setValue(cache, 'c', 'x');
    expect(await getOrComputeWith(cache, 'c', { checkValue: (value) => value === 'y' }, () => 'y')).toBe('y');
    expect(checkEvents()[1]?.issues).toEqual([{ message: 'checkValue returned false' }]);
    expect(stats().checkValueFailures).toBe(2);
  });

  it('a function that returns neither true, false nor a string fails, saying what it returned', async () => {
    const cache = testCache();
    await setValue(cache, 'k', 1);
    // A function that forgot its `return` answers undefined: not "returned false".
    const forgot = ((value: unknown) => {
      void value;
    }) as unknown as (value: unknown) => boolean;
    expect(
      await getOrComputeWith(cache, 'k', { checkValue: forgot }, () => 2).catch((e: Error) => e.message),
    ).toBe(
      'checkValue rejected the value: checkValue returned undefined, not true, false or a reason string',
    );
    expect(checkEvents()[0]?.issues).toEqual([
      { message: 'checkValue returned undefined, not true, false or a reason string' },
    ]);
    const one = (() => 1) as unknown as (value: unknown) => boolean;
    await setValue(cache, 'n', 1);
    expect(await getValue(cache, 'n', { checkValue: one })).toBeUndefined();
    expect(checkEvents()[2]?.issues).toEqual([
      { message: 'checkValue returned number 1, not true, false or a reason string' },
    ]);
  });

  it('an asynchronous Standard Schema works on hits and on fills', async () => {
    const cache = testCache({ async: true });
    const AsyncUser = User.refine(async (user) => user.name !== 'banned');
    await setValue(cache, 'k', { id: '1', name: 'banned' });
    const value = await getOrComputeWith(cache, 'k', { checkValue: AsyncUser }, () => ({
      id: '1',
      name: 'ok',
    }));
    expect(value).toEqual({ id: '1', name: 'ok' });
    expect(stats().checkValueFailures).toBe(1);
    const failed = await settle(
      getOrComputeWith(cache, 'j', { checkValue: AsyncUser }, () => ({ id: '2', name: 'banned' })),
    );
    expect(failed.ok).toBe(false);
    expect((failed as { error: CacheFillError }).error.kind).toBe('fill');
  });

  it('a stale value that fails is not served within the grace: a cold miss instead', async () => {
    const cache = testCache();
    await setValue(cache, 'k', 'old-shape', { ttl: '1s', staleWhileRevalidate: '1h' });
    vi.advanceTimersByTime(2_000);
    const fill = vi.fn(() => 42);
    const value = await getOrComputeWith(
      cache,
      'k',
      { ttl: '1s', staleWhileRevalidate: '1h', checkValue: z.number() },
      fill,
    );
    expect(value).toBe(42);
    expect(stats().staleHits).toBe(0);
    expect(stats().misses).toBe(1);
  });

  it('getValue: a failing value reads as undefined, a passing one as the output', async () => {
    const cache = testCache();
    await setValue(cache, 'good', { id: '1', name: 'n' });
    await setValue(cache, 'bad', { id: 1 });
    expect(await getValue(cache, 'good', { checkValue: UserV })).toEqual({ id: '1', name: 'n' });
    expect(await getValue(cache, 'bad', { checkValue: UserV })).toBeUndefined();
    expect(await getValue(cache, 'bad')).toEqual({ id: 1 });
    expect(stats().checkValueFailures).toBe(1);
  });

  it('a value found through the lock (another replica wrote it) that fails is filled here', async () => {
    const cache = testCache({ lock: true, async: true });
    const original = cache.tryAcquireFillLock;
    cache.tryAcquireFillLock = (key, ttl) => {
      // Old code on another replica fills between our miss and our lock.
      const entry: CacheEntry = {
        value: { id: 9 },
        createdAt: Date.now(),
        freshUntil: Infinity,
        staleUntil: Infinity,
      };
      cache.backend.write(key, entry, undefined);
      // biome-ignore lint/style/noNonNullAssertion: the test cache has the lock
      return original!(key, ttl);
    };
    const fill = vi.fn(() => ({ id: '1', name: 'fresh' }));
    const value = await getOrComputeWith(cache, 'k', { distributedFillLock: true, checkValue: User }, fill);
    expect(value).toEqual({ id: '1', name: 'fresh' });
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats().lockWaitHits).toBe(0);
    expect(stats().checkValueFailures).toBe(1);
  });
});

describe('checkValue on a fill result', () => {
  it("is a CacheFillError of kind 'fill' with the issues as cause, and nothing is cached", async () => {
    const cache = testCache();
    const result = await settle(getOrComputeWith(cache, 'k', { checkValue: User }, () => ({ id: 1 })));
    expect(result.ok).toBe(false);
    const error = (result as { error: CacheFillError }).error;
    expect(error).toBeInstanceOf(CacheFillError);
    expect(error.kind).toBe('fill');
    const issues = error.cause as StandardSchemaV1.Issue[];
    expect(Array.isArray(issues)).toBe(true);
    expect(issues.map((issue) => issue.path?.[0])).toEqual(['id', 'name']);
    expect(error.intoFill()).toBe(issues);
    expect(error.message).toMatch(/^checkValue rejected the value: id: /);
    expect(cache.calls.set).toBe(0);
    expect(cache.backend.read('k')).toBeUndefined();
    expect(stats()).toMatchObject({ fills: 1, fillFailures: 1, checkValueFailures: 1 });
    expect(checkEvents()).toMatchObject([{ key: 'k', source: 'fill' }]);
  });

  it("coalesced callers get kind 'fill_failed' with the same issues as cause", async () => {
    const cache = testCache();
    const gate = deferred<unknown>();
    const options = { checkValue: UserV };
    const leader = settle(getOrComputeWith(cache, 'k', options, () => gate.promise));
    const joiner = settle(getOrComputeWith(cache, 'k', options, () => ({ id: 'never', name: 'run' })));
    gate.resolve({ id: 'x' });
    const [a, b] = await Promise.all([leader, joiner]);
    const leaderError = (a as { error: CacheFillError }).error;
    const joinerError = (b as { error: CacheFillError }).error;
    expect(leaderError.kind).toBe('fill');
    expect(joinerError.kind).toBe('fill_failed');
    expect(joinerError.cause).toBe(leaderError.cause);
    expect(joinerError.intoFill()).toBeUndefined();
    expect(stats().checkValueFailures).toBe(1);
    // The key is not poisoned: the next call fills again.
    expect(await getOrComputeWith(cache, 'k', options, () => ({ id: '1', name: 'n' }))).toEqual({
      id: '1',
      name: 'n',
    });
  });

  it('checks what a hit would return: the value as the cache gives it back', async () => {
    const cache = testCache();
    cache.roundTrip = (value) => JSON.parse(JSON.stringify(value));
    const result = await settle(getOrComputeWith(cache, 'k', { checkValue: z.date() }, () => new Date(0)));
    expect(result.ok).toBe(false);
    const asText = await getOrComputeWith(cache, 'j', { checkValue: z.string() }, () => new Date(0));
    expect(asText).toBe('1970-01-01T00:00:00.000Z');
  });

  it('a failing background refresh keeps the stale value and counts', async () => {
    const cache = testCache();
    const options = { ttl: '1s', staleWhileRevalidate: '1h', checkValue: z.number() } as const;
    await getOrComputeWith(cache, 'k', options, () => 1);
    vi.advanceTimersByTime(2_000);
    const stale = await getOrComputeWith(cache, 'k', options, () => 'not a number' as unknown as number);
    expect(stale).toBe(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(stats()).toMatchObject({
      backgroundRefreshes: 1,
      backgroundRefreshFailures: 1,
      checkValueFailures: 1,
    });
    expect(cache.backend.read('k')?.value).toBe(1);
  });
});

describe('checkValue: bad input', () => {
  it.each([[42], ['string'], [{}], [null], [{ '~standard': {} }]])(
    'rejects %j with a TypeError naming options.checkValue, before any read',
    async (checkValue) => {
      const cache = testCache();
      await expect(
        getOrComputeWith(cache, 'k', { checkValue: checkValue as never }, () => 1),
      ).rejects.toThrow(/options\.checkValue/);
      await expect(getValue(cache, 'k', { checkValue: checkValue as never })).rejects.toThrow(
        /options\.checkValue/,
      );
      expect(cache.calls.get).toBe(0);
    },
  );
});

describe('checkValue: a success whose issues are null (falsy, as the Standard Schema allows)', () => {
  it('is a success: the value is served', async () => {
    const checkValue = {
      '~standard': {
        version: 1,
        vendor: 'hand-written',
        validate: (value: unknown) => ({ value, issues: null }),
      },
    } as unknown as StandardSchemaV1<number>;
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', { checkValue }, () => 5)).toBe(5);
    expect(await getOrComputeWith(cache, 'k', { checkValue }, () => 6)).toBe(5);
    expect(stats().checkValueFailures).toBe(0);
  });
});

describe('checkValue: a schema whose validate breaks the Standard Schema contract', () => {
  const schemaAnswering = (answer: () => unknown): StandardSchemaV1 =>
    ({ '~standard': { version: 1, vendor: 'broken', validate: answer } }) as unknown as StandardSchemaV1;

  it.each([
    ['null', () => null, 'null'],
    ['a number', () => 5, 'number 5'],
    ['an empty object', () => ({}), 'object'],
    ['issues that are not an array', () => ({ issues: 'bad' }), 'object'],
    ['issues that are an object', () => ({ issues: {} }), 'object'],
    ['a promise of null', () => Promise.resolve(null), 'null'],
  ])(
    '%s fails the fill result with an issue saying so; callers are answered and the key is free',
    async (_name, answer, what) => {
      const cache = testCache();
      const checkValue = schemaAnswering(answer);
      const outcome = await settle(getOrComputeWith(cache, 'k', { checkValue, fillTimeout: '1m' }, () => 1));
      expect(outcome.ok).toBe(false);
      const error = outcome.ok ? undefined : (outcome.error as CacheFillError);
      expect(error).toBeInstanceOf(CacheFillError);
      expect(error?.kind).toBe('fill');
      expect(error?.message).toBe(
        `checkValue rejected the value: checkValue's schema returned ${what}, not a Standard Schema result`,
      );
      expect(stats().checkValueFailures).toBe(1);
      // Nothing was cached and nothing is left in flight: the next call fills again and answers.
      expect(await getOrComputeWith(cache, 'k', { ttl: '1m' }, () => 2)).toBe(2);
    },
  );

  it('on a hit, a malformed result makes the value a miss (the promise rejects nothing synchronously)', async () => {
    const cache = testCache();
    await setValue(cache, 'k', 1);
    let call: Promise<unknown> | undefined;
    expect(() => {
      call = getOrComputeWith(cache, 'k', { checkValue: schemaAnswering(() => null) }, () => 2);
    }).not.toThrow();
    // The cached value failed, the fill's result fails too: kind 'fill', and the cached 1 was not served.
    await expect(call).rejects.toMatchObject({ kind: 'fill' });
    expect(checkEvents()[0]).toMatchObject({ source: 'cache' });
  });

  it('issues without a message are kept as issues that say what they were', async () => {
    const cache = testCache();
    const checkValue = schemaAnswering(() => ({ issues: [{ message: 'too short', path: ['name'] }, 42] }));
    await expect(getOrComputeWith(cache, 'k', { checkValue }, () => 1)).rejects.toThrow(
      'checkValue rejected the value: name: too short; an issue that is not { message }: number 42',
    );
  });
});

describe('checkValue with fail-safe: the cache keeps the schema input, callers get its output', () => {
  // A transforming schema: its output (a length) would not pass it again.
  const Length = z.string().transform((text) => text.length);
  const TTL = 10_000;
  const THROTTLE = 30_000;
  const options = {
    ttl: TTL,
    checkValue: Length,
    failSafe: { maxStale: 60_000, throttle: THROTTLE },
  } as const;
  const down = () =>
    vi.fn((): string => {
      throw new Error('db down');
    });

  it('a re-arm writes the stored input back, so the next callers hit it within the throttle', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', options, () => 'hello')).toBe(5);
    vi.advanceTimersByTime(TTL + 1);
    expect(await getOrComputeWith(cache, 'k', options, down())).toBe(5);
    await flush();
    expect(cache.backend.read('k')).toMatchObject({ value: 'hello', freshUntil: Date.now() + THROTTLE });
    const fill = down();
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe(5);
    expect(fill).not.toHaveBeenCalled();
    expect(stats().checkValueFailures).toBe(0);
    // Past the throttle the source is tried again, and the value still answers.
    vi.advanceTimersByTime(THROTTLE + 1);
    expect(await getOrComputeWith(cache, 'k', options, down())).toBe(5);
  });

  it('a fill result that fails the check is a failed fill: the previous value answers and is re-armed', async () => {
    const cache = testCache();
    expect(await getOrComputeWith(cache, 'k', options, () => 'hello')).toBe(5);
    vi.advanceTimersByTime(TTL + 1);
    // The source answers, but with what the schema refuses (a number where a string belongs).
    const bad = vi.fn(() => 42 as unknown as string);
    expect(await getOrComputeWith(cache, 'k', options, bad)).toBe(5);
    expect(stats()).toMatchObject({ checkValueFailures: 1, fillFailures: 1, failSafeActivations: 1 });
    await flush();
    expect(cache.backend.read('k')).toMatchObject({ value: 'hello', freshUntil: Date.now() + THROTTLE });
    // Without fail-safe the same result is the caller's error.
    vi.advanceTimersByTime(THROTTLE + TTL + 1);
    const plain = { ttl: TTL, checkValue: Length };
    await expect(getOrComputeWith(cache, 'k', plain, bad)).rejects.toMatchObject({ kind: 'fill' });
  });

  /**
   * A fill of `k` on replica a that fails after replica b wrote `written` (a fresh entry), with the
   * previous value 'hello' expired: the call's outcome, and the shared backend.
   */
  async function failWhileAnotherWrites(written: unknown) {
    const backend = new Backend();
    const a = testCache({ backend, name: 'a' });
    await getOrComputeWith(a, 'k', options, () => 'hello');
    vi.advanceTimersByTime(TTL + 1);
    const failing = deferred<string>();
    const call = settle(getOrComputeWith(a, 'k', options, () => failing.promise));
    await setValue(testCache({ backend, name: 'b' }), 'k', written, { ttl: TTL });
    failing.reject(new Error('db down'));
    return { result: await call, backend };
  }

  it("another replica's newer value found by the confirming read answers through the check", async () => {
    const { result, backend } = await failWhileAnotherWrites('newer value');
    expect(result).toEqual({ ok: true, value: 11 });
    await flush();
    expect(backend.read('k')?.value).toBe('newer value');
  });

  it("another replica's newer value that fails the check is a miss: the failure stands", async () => {
    // Other code (an older deploy) wrote a value of another shape.
    const { result } = await failWhileAnotherWrites({ length: 3 });
    expect(result.ok).toBe(false);
    expect(stats()).toMatchObject({ failSafeActivations: 0, checkValueFailures: 1 });
  });
});

// A transforming schema: its output (a length) is not what the cache holds (the text).
const JoinLength = z.string().transform((text) => text.length);

/** A schema that counts its runs (a transform to the text's length, like `JoinLength`). */
function countingSchema(): StandardSchemaV1<string, number> & { runs: number } {
  const schema = {
    runs: 0,
    '~standard': {
      version: 1 as const,
      vendor: 'test',
      validate(value: unknown) {
        schema.runs++;
        return typeof value === 'string' ? { value: value.length } : { issues: [{ message: 'not text' }] };
      },
    },
  };
  return schema;
}

describe('a caller joining a fill whose starting call had another checkValue runs its own', () => {
  it('a value its check refuses is a failed fill for it alone, counted, with the issues as cause', async () => {
    const cache = testCache();
    const gate = deferred<unknown>();
    const leader = getOrComputeWith(cache, 'k', {}, () => gate.promise);
    const joiner = settle(
      getOrComputeWith(
        cache,
        'k',
        { checkValue: (value) => typeof value === 'number' || 'not a number' },
        () => 0,
      ),
    );
    gate.resolve('text');
    expect(await leader).toBe('text');
    const result = await joiner;
    expect(result.ok).toBe(false);
    const error = (result as { error: CacheFillError }).error;
    expect(error).toBeInstanceOf(CacheFillError);
    expect(error.kind).toBe('fill_failed');
    expect(error.message).toBe('checkValue rejected the value: not a number');
    expect(error.cause).toEqual([{ message: 'not a number' }]);
    expect(stats()).toMatchObject({ fills: 1, fillFailures: 0, checkValueFailures: 1, coalescedWaits: 1 });
    expect(checkEvents()).toMatchObject([{ key: 'k', source: 'fill' }]);
    // The leader's value was written: it is what the unchecked caller asked for.
    await flush();
    expect(cache.backend.read('k')?.value).toBe('text');
  });

  it("a Standard Schema joiner gets the schema's output, as its type says (the starting call had none)", async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leader = getOrCompute(cache, 'k', '1m', () => gate.promise);
    const joiner = getOrComputeWith(cache, 'k', { ttl: '1m', checkValue: JoinLength }, () => 'never');
    gate.resolve('hello');
    expect(await leader).toBe('hello');
    const length: number = await joiner;
    expect(length).toBe(5);
    expect(stats()).toMatchObject({ fills: 1, checkValueFailures: 0 });
  });

  it("a caller without a check gets the value as the cache holds it, not another call's schema output", async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const leader = getOrComputeWith(cache, 'k', { checkValue: JoinLength }, () => gate.promise);
    const joiner = getOrComputeWith(cache, 'k', {}, () => 'never');
    const plain = getOrCompute(cache, 'k', '1m', () => 'never');
    gate.resolve('hello');
    expect(await leader).toBe(5);
    expect(await joiner).toBe('hello');
    expect(await plain).toBe('hello');
  });

  it('two schemas: each caller gets its own output; with a signal too (a promise of its own)', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const Upper = z.string().transform((text) => text.toUpperCase());
    const leader = getOrComputeWith(cache, 'k', { checkValue: JoinLength }, () => gate.promise);
    const upper = getOrComputeWith(cache, 'k', { checkValue: Upper }, () => 'never');
    const withSignal = getOrComputeWith(
      cache,
      'k',
      { checkValue: Upper, signal: new AbortController().signal },
      () => 'never',
    );
    gate.resolve('hello');
    expect(await leader).toBe(5);
    expect(await upper).toBe('HELLO');
    expect(await withSignal).toBe('HELLO');
  });

  it("a fresh value another caller's check refused is a hit for a caller without that check", async () => {
    const cache = testCache();
    await setValue(cache, 'k', 'text', { ttl: '5m' });
    const gate = deferred<unknown>();
    const numbers = {
      ttl: '5m',
      checkValue: (value: unknown) => typeof value === 'number' || 'not a number',
    } as const;
    const checked = settle(getOrComputeWith(cache, 'k', numbers, () => gate.promise));
    await flush();
    const plain = settle(getOrCompute(cache, 'k', '5m', () => 'never'));
    const other = settle(getOrComputeWith(cache, 'k', { ttl: '5m' }, () => 'never'));
    gate.reject(new Error('db down'));
    expect((await checked).ok).toBe(false);
    expect(await plain).toEqual({ ok: true, value: 'text' });
    expect(await other).toEqual({ ok: true, value: 'text' });
    expect(stats()).toMatchObject({ fills: 1, hits: 2, coalescedWaits: 0 });
  });

  it('a caller with another check joins, before reading, a fill that a plain miss started (one fill)', async () => {
    // Reads answer what the cache held when they started, 50 ms later, and writes land 20 ms after
    // they are made (requests over HTTP, not ordered): a caller that read first would miss, find the
    // fill gone once its write landed, and fill again.
    vi.useFakeTimers();
    const cache = testCache();
    const { get, set } = cache;
    const later = <T>(ms: number, answer: () => T) =>
      new Promise<T>((resolve) => setTimeout(() => resolve(answer()), ms));
    cache.get = (key) => {
      const held = get(key) as Awaited<ReturnType<typeof get>>;
      return later(50, () => held);
    };
    cache.set = (key, entry, options) => later(20, () => set(key, entry, options)) as Promise<void>;
    const numbers = {
      ttl: '5m',
      checkValue: (value: unknown) => typeof value === 'number' || 'not a number',
    } as const;
    let fills = 0;
    const fill = async () => {
      fills++;
      await new Promise((resolve) => setTimeout(resolve, 30));
      return 7;
    };
    const first = getOrComputeWith(cache, 'k', numbers, fill);
    await vi.advanceTimersByTimeAsync(70);
    const plain = getOrCompute(cache, 'k', '5m', fill);
    const other = getOrComputeWith(cache, 'k', { ttl: '5m', checkValue: (v: unknown) => v !== null }, fill);
    await vi.advanceTimersByTimeAsync(200);
    expect([await first, await plain, await other]).toEqual([7, 7, 7]);
    expect(fills).toBe(1);
    vi.useRealTimers();
  });

  it('an asynchronous check of the joiner works, and a refusal rejects', async () => {
    const cache = testCache();
    const gate = deferred<unknown>();
    const asyncPositive = z.number().refine(async (n) => n > 0, 'not positive');
    const leader = getOrComputeWith(cache, 'k', {}, () => gate.promise);
    const joiner = settle(getOrComputeWith(cache, 'k', { checkValue: asyncPositive }, () => 1));
    gate.resolve(-1);
    expect(await leader).toBe(-1);
    const result = await joiner;
    expect(result.ok).toBe(false);
    expect((result as { error: CacheFillError }).error.message).toMatch(/not positive/);
  });

  it('the same schema in other option objects shares the fill: checked once, one output for all', async () => {
    const cache = testCache();
    const schema = countingSchema();
    const gate = deferred<string>();
    const leader = getOrComputeWith(cache, 'k', { checkValue: schema }, () => gate.promise);
    const joiners = Array.from({ length: 20 }, () =>
      getOrComputeWith(cache, 'k', { ttl: '1m', checkValue: schema }, () => 'never'),
    );
    gate.resolve('hello');
    expect(await leader).toBe(5);
    expect(await Promise.all(joiners)).toEqual(Array.from({ length: 20 }, () => 5));
    expect(schema.runs).toBe(1);
  });

  it("a miss joining a stale read's refresh gets the checked output, as the refresh's callers would", async () => {
    const cache = testCache();
    const swr = { ttl: '1s', staleWhileRevalidate: '1h', checkValue: JoinLength } as const;
    expect(await getOrComputeWith(cache, 'k', swr, () => 'hi')).toBe(2);
    vi.advanceTimersByTime(2_000);
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', swr, () => gate.promise)).toBe(2);
    // No grace of its own: the stale value is a miss for it, and it joins the refresh.
    const strict = getOrComputeWith(cache, 'k', { ttl: '1s', checkValue: JoinLength }, () => 'never');
    const plain = getOrComputeWith(cache, 'k', { ttl: '1s' }, () => 'never');
    gate.resolve('hello');
    expect(await strict).toBe(5);
    expect(await plain).toBe('hello');
    expect(stats()).toMatchObject({ fills: 2, backgroundRefreshes: 1, coalescedWaits: 2 });
  });

  it("fail-safe's previous value reaches a joiner without a check as the cache holds it", async () => {
    const cache = testCache();
    const options = { ttl: 10_000, checkValue: JoinLength, failSafe: { maxStale: 60_000 } } as const;
    expect(await getOrComputeWith(cache, 'k', options, () => 'hello')).toBe(5);
    vi.advanceTimersByTime(10_001);
    const gate = deferred<string>();
    const leader = getOrComputeWith(cache, 'k', options, () => gate.promise);
    const joiner = getOrComputeWith(cache, 'k', { ttl: 10_000 }, () => 'never');
    const other = getOrComputeWith(
      cache,
      'k',
      { checkValue: z.string().transform((t) => `${t}!`) },
      () => '',
    );
    gate.reject(new Error('db down'));
    expect(await leader).toBe(5);
    expect(await joiner).toBe('hello');
    expect(await other).toBe('hello!');
  });

  it("a soft timeout's previous value reaches each waiting caller through its own check", async () => {
    const cache = testCache();
    const options = {
      ttl: 10_000,
      checkValue: JoinLength,
      failSafe: { maxStale: 60_000 },
      softTimeout: 100,
    } as const;
    expect(await getOrComputeWith(cache, 'k', options, () => 'hello')).toBe(5);
    vi.advanceTimersByTime(10_001);
    const gate = deferred<string>();
    const leader = getOrComputeWith(cache, 'k', options, () => gate.promise);
    const joiner = getOrComputeWith(cache, 'k', { ttl: 10_000 }, () => 'never');
    await vi.advanceTimersByTimeAsync(100);
    expect(await leader).toBe(5);
    expect(await joiner).toBe('hello');
    gate.resolve('later');
    await flush();
  });

  it('on an isolated runtime a watching joiner gets its own output too', async () => {
    configure({ isolatedRequests: true });
    try {
      const cache = testCache();
      const gate = deferred<string>();
      const leader = getOrComputeWith(cache, 'k', { checkValue: JoinLength }, () => gate.promise);
      const joiner = getOrComputeWith(cache, 'k', {}, () => 'never');
      const schema = getOrComputeWith(
        cache,
        'k',
        { checkValue: z.string().transform((t) => `${t}!`) },
        () => '',
      );
      gate.resolve('hello');
      await vi.advanceTimersByTimeAsync(20);
      expect(await leader).toBe(5);
      expect(await joiner).toBe('hello');
      expect(await schema).toBe('hello!');
    } finally {
      configure({ isolatedRequests: false });
    }
  });
});
