import { type BackendErrorEvent, onStampedeEvent } from '@stampede/core';
import type { CacheEntry } from '@stampede/core/adapter';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  acquireFillLock,
  acquireFillLockAndRead,
  COMMIT_LUA,
  createOperationRunner,
  createRedisProtocolContext,
  type FillLockWriter,
  fillLockHandle,
  LOCK_AND_READ_SCRIPT,
  RELEASE_LOCK_LUA,
  type RedisProtocolClient,
  RedisProtocolError,
  remoteKeys,
} from '../src/index.js';
import { RELEASE_RETRY_LIMIT_MS } from '../src/release-retry.js';

// A lock whose release (or commit) fails on a fault is released again in the background, with a
// back-off, until it lands: before, the lock stayed held for the rest of its TTL and every replica's
// next call on the key waited out lockWaitTimeout. Fake timers and a scripted client; the same
// against a real Redis and a real fault: redis/lock-release-retry.int.test.ts.

const OPERATION_TIMEOUT = 1_000;
const createError = (...args: ConstructorParameters<typeof RedisProtocolError>) =>
  new RedisProtocolError(...args);
const busy = () =>
  new Error('BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.');

interface Sent {
  readonly script: 'release' | 'commit' | 'other';
  readonly at: number;
  readonly keys: string[];
  readonly args: string[];
}

/**
 * A client whose scripts (plain EVAL: no SHA-1) are answered by `answer`, in order of sending;
 * every call is recorded with its fake time.
 */
function scriptedClient(answer: (sent: Sent, index: number) => Promise<unknown>) {
  const sent: Sent[] = [];
  const client: RedisProtocolClient = {
    get: async () => null,
    setIfAbsent: async () => 'OK',
    evalsha: async () => {
      throw new Error('NOSCRIPT');
    },
    eval: (source, keys, args) => {
      const script = source === RELEASE_LOCK_LUA ? 'release' : source === COMMIT_LUA ? 'commit' : 'other';
      const call: Sent = { script, at: Date.now(), keys, args };
      sent.push(call);
      return answer(call, sent.length - 1);
    },
    sha1: () => undefined,
  };
  return { client, sent };
}

function contextOn(client: RedisProtocolClient, waitUntil?: (promise: Promise<unknown>) => void) {
  const operations = createOperationRunner({
    name: 'release-retry-test',
    label: 'test',
    operationTimeout: OPERATION_TIMEOUT,
    createError,
    waitUntil,
  });
  return createRedisProtocolContext(client, 'rr:', operations);
}

function handleOn(
  client: RedisProtocolClient,
  options: { lease?: number; writer?: FillLockWriter; waitUntil?: (promise: Promise<unknown>) => void } = {},
) {
  const context = contextOn(client, options.waitUntil);
  return { context, lock: fillLockHandle(context, 'k', 'token-1', options.writer, options.lease ?? 10_000) };
}

const writer: FillLockWriter = {
  args: () => ({ text: 's2|entry', createdAt: '1000000', px: '60000' }),
  tagPrefix: 'rr:',
};

/** Whether `promise` has settled, read after the microtasks of a timer advance. */
function watch(promise: Promise<unknown>) {
  const state = { settled: false, error: undefined as unknown };
  promise.then(
    () => {
      state.settled = true;
    },
    (error: unknown) => {
      state.settled = true;
      state.error = error;
    },
  );
  return state;
}

let events: BackendErrorEvent[];
let stopListening: () => void;

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
  events = [];
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error' && event.cache === 'release-retry-test') events.push(event);
  });
});
afterEach(() => {
  stopListening();
  vi.useRealTimers();
});

describe('a lock release that fails on a fault', () => {
  it('is sent again after 50, 100, 200 ms until it lands, reported once; release() settles then', async () => {
    const { client, sent } = scriptedClient(async (_, index) => {
      if (index < 3) throw busy();
      return 1;
    });
    const { lock } = handleOn(client);
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('failed')));
    await vi.advanceTimersByTimeAsync(349);
    expect(sent.map((each) => each.at - start)).toEqual([0, 50, 150]);
    expect(released.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.map((each) => each.at - start)).toEqual([0, 50, 150, 350]);
    expect(released).toEqual({ settled: true, error: undefined });
    // Each attempt is the same compare-and-delete by this holder's token, announcing the outcome.
    const { lock: lockKey, channel } = remoteKeys('rr:', 'k');
    for (const each of sent) {
      expect(each).toMatchObject({
        script: 'release',
        keys: [lockKey, channel],
        args: ['token-1', 'failed'],
      });
    }
    // One fault, one report: the retries' faults add none.
    expect(events.map((event) => [event.operation, event.key])).toEqual([['release', 'k']]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(4);
    // A released handle sends nothing more.
    await lock.release('filled');
    expect(sent).toHaveLength(4);
  });

  it('backs off to one attempt a second and stops once the lock would have lapsed', async () => {
    const { client, sent } = scriptedClient(async () => {
      throw busy();
    });
    const { lock } = handleOn(client, { lease: 3_000 });
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('filled')));
    await vi.advanceTimersByTimeAsync(3_000);
    // 0, then pauses of 50, 100, 200, 400, 800, 1000 (the ceiling); the next would come after the lapse.
    expect(sent.map((each) => each.at - start)).toEqual([0, 50, 150, 350, 750, 1_550, 2_550]);
    expect(released).toEqual({ settled: true, error: undefined });
    expect(events).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(7);
  });

  it('counts an extension in the lease: retries go on until the extended lock would have lapsed', async () => {
    let failing = true;
    const { client, sent } = scriptedClient(async (call) => {
      if (call.script === 'other') return 1; // the extension
      if (failing) throw busy();
      return 1;
    });
    const { lock } = handleOn(client, { lease: 1_000 });
    await vi.advanceTimersByTimeAsync(900);
    expect(await lock.extend?.(5_000)).toBe(true);
    const released = watch(Promise.resolve(lock.release('failed')));
    // Past the first lease (1 s from the grant), still within the extended one (5 s from 900 ms).
    await vi.advanceTimersByTimeAsync(2_000);
    expect(released.settled).toBe(false);
    failing = false;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(released).toEqual({ settled: true, error: undefined });
    expect(sent.filter((each) => each.script === 'release').length).toBeGreaterThan(5);
  });

  it('never runs longer than RELEASE_RETRY_LIMIT_MS, however long the lease', async () => {
    const { client, sent } = scriptedClient(async () => {
      throw busy();
    });
    const { lock } = handleOn(client, { lease: 24 * 3_600_000 });
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('failed')));
    await vi.advanceTimersByTimeAsync(RELEASE_RETRY_LIMIT_MS);
    expect(released.settled).toBe(true);
    const last = sent.at(-1)?.at ?? start;
    expect(last - start).toBeLessThan(RELEASE_RETRY_LIMIT_MS);
    const count = sent.length;
    await vi.advanceTimersByTimeAsync(10 * RELEASE_RETRY_LIMIT_MS);
    expect(sent).toHaveLength(count);
  });

  it('is not sent again once a timed-out attempt answers after all', async () => {
    const { client, sent } = scriptedClient(
      // Answers 30 ms after the time-out, before the first retry (50 ms after it).
      () => new Promise((resolve) => setTimeout(() => resolve(1), OPERATION_TIMEOUT + 30)),
    );
    const { lock } = handleOn(client);
    const released = watch(Promise.resolve(lock.release('filled')));
    await vi.advanceTimersByTimeAsync(OPERATION_TIMEOUT);
    expect(events.map((event) => event.operation)).toEqual(['release']);
    await vi.advanceTimersByTimeAsync(100);
    expect(released).toEqual({ settled: true, error: undefined });
    expect(sent).toHaveLength(1);
  });

  it('a permission refusal is thrown as before and not retried', async () => {
    const { client, sent } = scriptedClient(async () => {
      throw new Error("NOPERM User stampede has no permissions to run the 'evalsha' command");
    });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { lock, context } = handleOn(client);
    const released = watch(Promise.resolve(lock.release('failed')));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(released.settled).toBe(true);
    expect(String(released.error)).toMatch(/NOPERM/);
    // The announcing release, then the same without the announcement (to tell a refused PUBLISH
    // apart): refused scripts, which turn the lock off. Nothing more.
    expect(sent.map((each) => each.args[1])).toEqual(['failed', '']);
    expect(context.access.scripts).toBe(false);
    expect(warn).toHaveBeenCalledTimes(1);
    warn.mockRestore();
    expect(events).toEqual([]);
  });

  it('hands the release with its retries to waitUntil', async () => {
    const kept: Promise<unknown>[] = [];
    const { client, sent } = scriptedClient(async (_, index) => {
      if (index < 2) throw busy();
      return 1;
    });
    const { lock } = handleOn(client, { waitUntil: (promise) => kept.push(promise) });
    void lock.release('failed');
    expect(kept).toHaveLength(1);
    const keptState = watch(kept[0] as Promise<unknown>);
    await vi.advanceTimersByTimeAsync(149);
    expect(keptState.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(3);
    expect(keptState.settled).toBe(true);
  });
});

describe('a commit that fails on a fault', () => {
  const entry: CacheEntry = {
    value: 'v',
    createdAt: 1_000_000,
    freshUntil: 1_060_000,
    staleUntil: 1_060_000,
  };
  it('is not sent again as a write: the release that follows it (as the core calls it) is retried, announcing filled', async () => {
    const { client, sent } = scriptedClient(async (call, index) => {
      if (call.script === 'commit' || index < 3) throw busy();
      return 1;
    });
    const { lock } = handleOn(client, { writer });
    const start = Date.now();
    await expect(lock.commit?.(entry, { ttl: 60_000 })).rejects.toThrow(/BUSY/);
    // What the core does after a failed commit (commitEntry): report `set`, then release as filled.
    const released = watch(Promise.resolve(lock.release('filled')));
    await vi.advanceTimersByTimeAsync(150);
    // The announcement: ARGV[6] of the commit, ARGV[2] of a release.
    const announced = (each: Sent) => (each.script === 'commit' ? each.args[5] : each.args[1]);
    expect(sent.map((each) => [each.script, each.at - start, announced(each)])).toEqual([
      ['commit', 0, 'filled'],
      ['release', 0, 'filled'],
      ['release', 50, 'filled'],
      ['release', 150, 'filled'],
    ]);
    expect(released).toEqual({ settled: true, error: undefined });
    expect(events.map((event) => event.operation)).toEqual(['release']);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent.filter((each) => each.script === 'commit')).toHaveLength(1);
  });

  it('a commit that lands after its time-out leaves no retry to the release that follows', async () => {
    const { client, sent } = scriptedClient((call) =>
      call.script === 'commit'
        ? new Promise((resolve) => setTimeout(() => resolve(1), OPERATION_TIMEOUT + 10))
        : Promise.reject(busy()),
    );
    const { lock } = handleOn(client, { writer });
    const committed = lock.commit?.(entry, { ttl: 60_000 });
    const rejected = expect(committed).rejects.toThrow(/did not answer/);
    await vi.advanceTimersByTimeAsync(OPERATION_TIMEOUT);
    await rejected;
    const released = watch(Promise.resolve(lock.release('filled')));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(released.settled).toBe(true);
    // The release tried once (and failed); the commit had landed meanwhile, so no retry.
    expect(sent.map((each) => each.script)).toEqual(['commit', 'release']);
  });
});

describe('a lock granted after its time-out', () => {
  // Before, such a grant was released once, and a fault left it held for its whole TTL: every
  // replica's next call on the key waited out lockWaitTimeout for a lock nobody used.
  const late = <T>(value: T) =>
    new Promise<T>((resolve) => setTimeout(() => resolve(value), OPERATION_TIMEOUT + 10));

  it('SET NX: is released as failed, and the release sent again on a fault like any other', async () => {
    let releases = 0;
    const { client: scripted, sent } = scriptedClient(async () => {
      if (releases++ < 2) throw busy();
      return 1;
    });
    let token = '';
    const client: RedisProtocolClient = {
      ...scripted,
      setIfAbsent: (_key, value) => {
        token = value;
        return late('OK');
      },
    };
    const start = Date.now();
    const rejected = expect(acquireFillLock(contextOn(client), 'k', 10_000)).rejects.toThrow(
      /did not answer/,
    );
    await vi.advanceTimersByTimeAsync(OPERATION_TIMEOUT);
    await rejected;
    await vi.advanceTimersByTimeAsync(10 + 150);
    const answered = start + OPERATION_TIMEOUT + 10;
    // Announced as failed: no fill ran under it, and a replica that lost to it contends again at once.
    expect(sent.map((each) => [each.script, each.at - answered, each.args])).toEqual([
      ['release', 0, [token, 'failed']],
      ['release', 50, [token, 'failed']],
      ['release', 150, [token, 'failed']],
    ]);
    expect(events.map((event) => [event.operation, event.key])).toEqual([['release', 'k']]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(3);
  });

  it('lock and read in one script: the same', async () => {
    let releases = 0;
    const { client, sent } = scriptedClient((call) => {
      if (call.script === 'other') return late([1, call.args[0], null]);
      return releases++ < 2 ? Promise.reject(busy()) : Promise.resolve(1);
    });
    const start = Date.now();
    const rejected = expect(
      acquireFillLockAndRead(contextOn(client), 'k', 10_000, LOCK_AND_READ_SCRIPT, writer),
    ).rejects.toThrow(/did not answer/);
    await vi.advanceTimersByTimeAsync(OPERATION_TIMEOUT);
    await rejected;
    await vi.advanceTimersByTimeAsync(10 + 150);
    const answered = start + OPERATION_TIMEOUT + 10;
    const token = sent[0]?.args[0];
    expect(sent.map((each) => [each.script, each.at - answered, each.args])).toEqual([
      ['other', -(OPERATION_TIMEOUT + 10), [token, '10000', 'rr:']],
      ['release', 0, [token, 'failed']],
      ['release', 50, [token, 'failed']],
      ['release', 150, [token, 'failed']],
    ]);
    expect(events.map((event) => [event.operation, event.key])).toEqual([['release', 'k']]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(4);
  });
});

describe('settling the retries (what close() does)', () => {
  it('sends a pending retry at once, as the last one, and release() settles with it', async () => {
    const { client, sent } = scriptedClient(async () => {
      throw busy();
    });
    const { lock, context } = handleOn(client, { lease: 60_000 });
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('failed')));
    // Attempts at 0, 50, 150, 350, 750; the next would come at 1,550.
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sent.map((each) => each.at - start)).toEqual([0, 50, 150, 350, 750]);
    const settled = watch(context.releaseRetries.settle());
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((each) => each.at - start)).toEqual([0, 50, 150, 350, 750, 1_000]);
    expect(settled).toEqual({ settled: true, error: undefined });
    expect(released).toEqual({ settled: true, error: undefined });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(6);
    expect(events).toHaveLength(1);
  });

  it('the last attempt lands: settle() resolves once it has', async () => {
    let healthy = false;
    const { client, sent } = scriptedClient(
      () => new Promise((resolve, reject) => setTimeout(() => (healthy ? resolve(1) : reject(busy())), 20)),
    );
    const { lock, context } = handleOn(client, { lease: 60_000 });
    const released = watch(Promise.resolve(lock.release('filled')));
    await vi.advanceTimersByTimeAsync(500);
    healthy = true;
    const count = sent.length;
    const settled = watch(context.releaseRetries.settle());
    await vi.advanceTimersByTimeAsync(19);
    expect(sent).toHaveLength(count + 1);
    expect(settled.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(settled).toEqual({ settled: true, error: undefined });
    expect(released).toEqual({ settled: true, error: undefined });
  });

  it('an attempt in flight when settle() is called is the last one', async () => {
    // Each attempt answers BUSY 100 ms after it is sent.
    const { client, sent } = scriptedClient(
      () => new Promise((_, reject) => setTimeout(() => reject(busy()), 100)),
    );
    const { lock, context } = handleOn(client, { lease: 60_000 });
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('failed')));
    // The first attempt failed at 100, the retry went out at 150 and is in flight.
    await vi.advanceTimersByTimeAsync(160);
    expect(sent.map((each) => each.at - start)).toEqual([0, 150]);
    const settled = watch(context.releaseRetries.settle());
    await vi.advanceTimersByTimeAsync(90);
    expect(settled).toEqual({ settled: true, error: undefined });
    expect(released).toEqual({ settled: true, error: undefined });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(2);
  });

  it('a release that fails afterwards is tried once more at once, then left to lapse', async () => {
    const { client, sent } = scriptedClient(async () => {
      throw busy();
    });
    const { lock, context } = handleOn(client, { lease: 60_000 });
    // Nothing pending: at once.
    const settled = watch(context.releaseRetries.settle());
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toEqual({ settled: true, error: undefined });
    const start = Date.now();
    const released = watch(Promise.resolve(lock.release('failed')));
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((each) => each.at - start)).toEqual([0, 0]);
    expect(released).toEqual({ settled: true, error: undefined });
    expect(events).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(2);
  });
});
