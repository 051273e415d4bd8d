// The `node` entry point: fills run in an AsyncLocalStorage context.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type CacheFillError,
  getOrCompute,
  getOrComputeWith,
  inFlightCount,
  isCacheFillError,
  resetStats,
} from '../src/node.js';
import { shared } from '../src/shared.js';
import { deferred, settle, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

/** The error the outer caller gets: its fill failed with the inner call's error. */
function selfWaitOf(result: { ok: boolean; error?: unknown }, key: string): TypeError {
  expect(result.ok).toBe(false);
  expect(isCacheFillError(result.error)).toBe(true);
  const error = result.error as CacheFillError;
  expect(error.kind).toBe('fill');
  expect(error.cause).toBeInstanceOf(TypeError);
  const cause = error.cause as TypeError;
  expect(cause.message).toContain(`'${key}'`);
  expect(cause.message).toMatch(/its own result forever/);
  return cause;
}

describe('a fill that calls getOrCompute on its own key fails at once instead of waiting for itself', () => {
  it('directly, before any await', async () => {
    const cache = testCache();
    const result = await settle(
      getOrCompute(cache, 'k', undefined, () => getOrCompute(cache, 'k', undefined, () => 1)),
    );
    selfWaitOf(result, 'k');
    expect(inFlightCount(cache)).toBe(0);
  });

  it('after awaits, through getOrComputeWith, on an asynchronous cache', async () => {
    const cache = testCache({ async: true });
    const result = await settle(
      getOrComputeWith(cache, 'user:1', { ttl: '1m' }, async () => {
        await tick();
        await Promise.resolve();
        return getOrComputeWith(cache, 'user:1', { ttl: '1m' }, () => 1);
      }),
    );
    selfWaitOf(result, 'user:1');
    // Nothing is stuck: the key can be filled again.
    expect(await getOrCompute(cache, 'user:1', '1m', () => 'fine')).toBe('fine');
  });

  it('through a fill of another key that it started and awaits (a -> b -> a)', async () => {
    const cache = testCache();
    const result = await settle(
      getOrCompute(cache, 'a', undefined, async () => {
        await tick();
        return getOrCompute(cache, 'b', undefined, async () => {
          await tick();
          return getOrCompute(cache, 'a', undefined, () => 'never');
        });
      }),
    );
    expect(result.ok).toBe(false);
    expect(String((result as { error: CacheFillError }).error.message)).toMatch(/'a'/);
    expect(inFlightCount(cache)).toBe(0);
  });

  it('the other callers of that fill hear of it too (fill_failed), and the key is not poisoned', async () => {
    const cache = testCache();
    const gate = deferred<void>();
    const leader = settle(
      getOrCompute(cache, 'k', undefined, async () => {
        await gate.promise;
        return getOrCompute(cache, 'k', undefined, () => 1);
      }),
    );
    const joiner = settle(getOrCompute(cache, 'k', undefined, () => 'unused'));
    gate.resolve();
    selfWaitOf(await leader, 'k');
    const joined = await joiner;
    expect((joined as { error: CacheFillError }).error.kind).toBe('fill_failed');
    expect(await getOrCompute(cache, 'k', undefined, () => 'next')).toBe('next');
  });
});

describe('no false alarm', () => {
  it('a fill that calls getOrCompute on a different key', async () => {
    const cache = testCache({ async: true });
    const value = await getOrCompute(cache, 'outer', undefined, async () => {
      await tick();
      const inner = await getOrCompute(cache, 'inner', undefined, async () => {
        await tick();
        return 2;
      });
      return inner + 1;
    });
    expect(value).toBe(3);
  });

  it('the same key on another cache', async () => {
    const first = testCache({ name: 'first' });
    const second = testCache({ name: 'second' });
    const value = await getOrCompute(first, 'k', undefined, async () => {
      await tick();
      return getOrCompute(second, 'k', undefined, () => 'from second');
    });
    expect(value).toBe('from second');
  });

  it('concurrent callers outside the fill still coalesce onto it', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const fill = vi.fn(() => gate.promise);
    const callers = [getOrCompute(cache, 'k', undefined, fill), getOrCompute(cache, 'k', undefined, fill)];
    await tick();
    const late = getOrCompute(cache, 'k', undefined, fill);
    gate.resolve('v');
    expect(await Promise.all([...callers, late])).toEqual(['v', 'v', 'v']);
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('a background refresh whose fill reads its own key gets the stale value', async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache();
    const options = { ttl: 100, staleWhileRevalidate: 1_000 };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    await vi.advanceTimersByTimeAsync(150);
    const seen: unknown[] = [];
    expect(
      await getOrComputeWith(cache, 'k', options, async (ctx) => {
        seen.push(await getOrComputeWith(cache, 'k', options, () => 'unused'));
        return `new after ${String(ctx.stale)}`;
      }),
    ).toBe('old');
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toEqual(['old']);
    expect(await getOrComputeWith(cache, 'k', options, () => 'unused')).toBe('new after old');
  });

  it('the caller that started a background refresh reads the key again in the same context', async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache();
    const options = { ttl: 100, staleWhileRevalidate: 1_000 };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    await vi.advanceTimersByTimeAsync(150);
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', options, () => gate.promise)).toBe('old');
    expect(await getOrComputeWith(cache, 'k', options, () => 'unused')).toBe('old');
    // Past the grace, a plain read joins the refresh in flight and gets its value.
    await vi.advanceTimersByTimeAsync(1_000);
    const joined = getOrCompute(cache, 'k', 100, () => 'unused');
    gate.resolve('new');
    expect(await joined).toBe('new');
  });

  it('work a fill left running reads the key after the fill returned, while its write is in flight', async () => {
    const cache = testCache();
    const write = deferred<void>();
    const original = cache.set.bind(cache);
    cache.set = (key, entry, options) => write.promise.then(() => original(key, entry, options));
    let later: Promise<unknown> | undefined;
    const leader = getOrCompute(cache, 'k', undefined, () => {
      later = Promise.resolve().then(async () => {
        await tick();
        return getOrCompute(cache, 'k', undefined, () => 'unused');
      });
      return 'v';
    });
    await tick();
    await tick();
    write.resolve();
    expect(await leader).toBe('v');
    expect(await later).toBe('v');
  });
});

describe('background refreshes run outside the async context', () => {
  it('nothing is tracked while a stale-while-revalidate refresh runs, so the promise hooks stay off', async () => {
    vi.useFakeTimers({ now: 0 });
    const tracking = shared.fills;
    const cache = testCache();
    const options = { ttl: 100, staleWhileRevalidate: 1_000 };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    await vi.advanceTimersByTimeAsync(150);
    const gate = deferred<string>();
    let store: unknown = 'unset';
    expect(
      await getOrComputeWith(cache, 'k', options, async () => {
        store = tracking?.storage.getStore();
        return gate.promise;
      }),
    ).toBe('old');
    expect(inFlightCount(cache)).toBe(1);
    expect(tracking?.running).toBe(0);
    expect(store).toBeUndefined();
    gate.resolve('new');
    await vi.advanceTimersByTimeAsync(1);
    expect(await getOrComputeWith(cache, 'k', options, () => 'unused')).toBe('new');
  });

  it("one started from inside a fill is cut off from it: it may read that fill's key", async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache();
    const options = { ttl: 100, staleWhileRevalidate: 1_000 };
    await getOrComputeWith(cache, 'b', options, () => 'b-old');
    await vi.advanceTimersByTimeAsync(150);
    const outer = deferred<string>();
    let inner: Promise<unknown> | undefined;
    const a = getOrCompute(cache, 'a', undefined, async () => {
      // A stale read of b inside a's fill starts b's refresh, which reads a: it joins a's fill
      // (nobody waits for the refresh, so nothing deadlocks) instead of being refused.
      const b = await getOrComputeWith(cache, 'b', options, async () => {
        inner = getOrCompute(cache, 'a', undefined, () => 'unused');
        return `b-new after ${String(await inner)}`;
      });
      return `a after ${String(b)} ${await outer.promise}`;
    });
    await vi.advanceTimersByTimeAsync(1);
    outer.resolve('done');
    expect(await a).toBe('a after b-old done');
    expect(await inner).toBe('a after b-old done');
    await vi.advanceTimersByTimeAsync(1);
    expect(await getOrComputeWith(cache, 'b', options, () => 'unused')).toBe(
      'b-new after a after b-old done',
    );
  });
});

describe('the context costs nothing once no fill runs', () => {
  it('the AsyncLocalStorage is disabled when the last fill settles', async () => {
    const tracking = shared.fills;
    expect(tracking).toBeDefined();
    const cache = testCache();
    const gate = deferred<number>();
    const answer = getOrCompute(cache, 'k', undefined, () => gate.promise);
    expect(tracking?.running).toBe(1);
    expect(tracking?.storage.getStore()).toBeUndefined();
    gate.resolve(1);
    await answer;
    expect(tracking?.running).toBe(0);
    const disable = vi.spyOn(tracking?.storage as { disable(): void }, 'disable');
    await getOrCompute(cache, 'sync', undefined, () => 2);
    expect(disable).toHaveBeenCalledTimes(1);
  });
});

describe('configure({ detectSelfCalls: false })', () => {
  afterEach(async () => {
    const { configure } = await import('../src/node.js');
    configure({ detectSelfCalls: true });
  });

  it('runs fills outside the async context: a self-call then waits until its fillTimeout', async () => {
    const { configure } = await import('../src/node.js');
    vi.useFakeTimers();
    configure({ detectSelfCalls: false });
    const cache = testCache();
    let inner: Promise<unknown> | undefined;
    const outer = settle(
      getOrComputeWith(cache, 'k', { fillTimeout: 1_000 }, async () => {
        await Promise.resolve();
        inner = getOrCompute(cache, 'k', undefined, () => 2);
        return inner;
      }),
    );
    await vi.advanceTimersByTimeAsync(999);
    expect(shared.fills?.running ?? 0).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    const result = await outer;
    if (result.ok) throw new Error('the self-call should have timed out');
    expect((result.error as CacheFillError).kind).toBe('timeout');
    expect(inFlightCount(cache)).toBe(0);
  });

  it('refuses a value that is not a boolean, naming the setting', async () => {
    const { configure } = await import('../src/node.js');
    expect(() => configure({ detectSelfCalls: 'no' as unknown as boolean })).toThrow(
      /config\.detectSelfCalls/,
    );
  });
});
