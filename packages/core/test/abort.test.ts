import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { configure, getOrComputeWith, inFlightCount, resetStats } from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('abort signals', () => {
  it('an aborted caller leaves; the shared fill goes on for the others', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const first = new AbortController();
    const leaving = settle(
      getOrComputeWith(cache, 'k', { signal: first.signal }, (ctx) => {
        fillSignal = ctx.signal;
        return gate.promise;
      }),
    );
    const staying = getOrComputeWith(cache, 'k', {}, () => 'unused');
    first.abort(new DOMException('gone', 'AbortError'));
    const left = await leaving;
    expect(left.ok).toBe(false);
    expect((left as { error: DOMException }).error.name).toBe('AbortError');
    expect(fillSignal?.aborted).toBe(false);
    gate.resolve('shared');
    expect(await staying).toBe('shared');
    expect(cache.backend.read('k')?.value).toBe('shared');
  });

  it('a fill that reads its signal only after every caller left finds it aborted, with the reason', async () => {
    const cache = testCache();
    const gate = deferred<void>();
    let context: { readonly signal: AbortSignal } | undefined;
    const caller = new AbortController();
    const left = settle(
      getOrComputeWith(cache, 'k', { signal: caller.signal }, async (ctx) => {
        context = ctx;
        await gate.promise;
        return 'late';
      }),
    );
    caller.abort(new Error('gone'));
    expect((await left).ok).toBe(false);
    const signal = context?.signal;
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(Error);
    expect(context?.signal).toBe(signal); // one signal, however often it is read
    gate.resolve();
  });

  it("the fill's signal aborts only when every caller has aborted, and the result is then not written", async () => {
    const cache = testCache();
    const gate = deferred<string>();
    let fillSignal: AbortSignal | undefined;
    const controllers = [new AbortController(), new AbortController(), new AbortController()];
    const callers = controllers.map((c) =>
      settle(
        getOrComputeWith(cache, 'k', { signal: c.signal }, (ctx) => {
          fillSignal = ctx.signal;
          return gate.promise;
        }),
      ),
    );
    controllers[0]?.abort();
    controllers[1]?.abort();
    await flush();
    expect(fillSignal?.aborted).toBe(false);
    controllers[2]?.abort();
    await flush();
    expect(fillSignal?.aborted).toBe(true);
    expect(inFlightCount(cache)).toBe(0);
    for (const result of await Promise.all(callers)) expect(result.ok).toBe(false);
    gate.resolve('nobody wants me');
    await flush();
    expect(cache.backend.entries.has('k')).toBe(false);
  });

  it('an already aborted signal rejects before anything is read', async () => {
    const cache = testCache();
    const controller = new AbortController();
    controller.abort(new Error('already'));
    await expect(getOrComputeWith(cache, 'k', { signal: controller.signal }, () => 1)).rejects.toThrow(
      'already',
    );
    expect(cache.calls.get).toBe(0);
  });

  it('a caller without a signal keeps an otherwise abandoned fill alive', async () => {
    const cache = testCache();
    const gate = deferred<number>();
    const controller = new AbortController();
    let fillSignal: AbortSignal | undefined;
    const aborting = settle(
      getOrComputeWith(cache, 'k', { signal: controller.signal }, (ctx) => {
        fillSignal = ctx.signal;
        return gate.promise;
      }),
    );
    const patient = getOrComputeWith(cache, 'k', {}, () => 0);
    controller.abort();
    await aborting;
    expect(fillSignal?.aborted).toBe(false);
    gate.resolve(5);
    expect(await patient).toBe(5);
  });
});

describe('a signal that is not a working AbortSignal', () => {
  it('an object without removeEventListener is a TypeError naming options.signal, before any read', async () => {
    const cache = testCache();
    const fake = { aborted: false, addEventListener() {} } as unknown as AbortSignal;
    await expect(getOrComputeWith(cache, 'k', { signal: fake }, () => 1)).rejects.toThrow(
      new TypeError('options.signal must be an AbortSignal; got object'),
    );
    expect(cache.calls.get).toBe(0);
  });

  it('one whose removeEventListener throws still has its caller, and every other caller, answered', async () => {
    const cache = testCache();
    const gate = deferred<string>();
    const broken = new AbortController().signal;
    broken.removeEventListener = () => {
      throw new Error('broken polyfill');
    };
    const others = new AbortController();
    const first = getOrComputeWith(cache, 'k', { signal: broken }, () => gate.promise);
    const second = getOrComputeWith(cache, 'k', { signal: others.signal }, () => 'unused');
    const third = getOrComputeWith(cache, 'k', { signal: broken }, () => 'unused');
    gate.resolve('v');
    expect(await Promise.all([first, second, third])).toEqual(['v', 'v', 'v']);
    expect(inFlightCount(cache)).toBe(0);
  });
});

describe('a signal without a reason (an AbortController polyfill from before `reason`)', () => {
  /** The shape such polyfills give: `aborted` and the listener methods, no `reason`. */
  function polyfilledSignal() {
    const listeners = new Set<() => void>();
    const signal = {
      aborted: false,
      addEventListener: (_type: string, listener: () => void) => listeners.add(listener),
      removeEventListener: (_type: string, listener: () => void) => listeners.delete(listener),
    };
    const abort = () => {
      signal.aborted = true;
      for (const listener of [...listeners]) listener();
    };
    return { signal: signal as unknown as AbortSignal, abort };
  }

  it('rejects its caller with an AbortError, never undefined: aborted before the call, or while waiting', async () => {
    const before = polyfilledSignal();
    before.abort();
    const early = await settle(getOrComputeWith(testCache(), 'k', { signal: before.signal }, () => 'v'));
    expect((early as { error: unknown }).error).toBeInstanceOf(DOMException);
    expect((early as { error: DOMException }).error.name).toBe('AbortError');

    const cache = testCache();
    const gate = deferred<string>();
    const during = polyfilledSignal();
    const leaving = settle(getOrComputeWith(cache, 'k', { signal: during.signal }, () => gate.promise));
    const staying = getOrComputeWith(cache, 'k', {}, () => 'unused');
    during.abort();
    const left = await leaving;
    expect((left as { error: DOMException }).error.name).toBe('AbortError');
    gate.resolve('shared');
    expect(await staying).toBe('shared');
  });
});

describe('a caller may abort in every phase', () => {
  it('during a slow read: it rejects at once, nothing is filled for it', async () => {
    const cache = testCache();
    const read = deferred<undefined>();
    cache.get = () => read.promise;
    const controller = new AbortController();
    const fill = vi.fn(() => 'v');
    const caller = settle(getOrComputeWith(cache, 'k', { signal: controller.signal }, fill));
    controller.abort(new Error('left during read'));
    read.resolve(undefined);
    const result = await caller;
    expect(result.ok).toBe(false);
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    expect(fill).not.toHaveBeenCalled();
  });

  it('during the lock wait: the wait stops, the lock is never taken, the registry ends empty', async () => {
    vi.useFakeTimers({ now: 0 });
    const backend = new Backend();
    backend.lock('k', 60_000);
    const cache = testCache({ backend, lock: true });
    const controller = new AbortController();
    const fill = vi.fn(() => 'v');
    const caller = settle(
      getOrComputeWith(cache, 'k', { distributedFillLock: true, signal: controller.signal }, fill),
    );
    await vi.advanceTimersByTimeAsync(120);
    controller.abort(new Error('left during lock wait'));
    await vi.advanceTimersByTimeAsync(10_000);
    const result = await caller;
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.message).toBe('left during lock wait');
    expect(fill).not.toHaveBeenCalled();
    expect(inFlightCount(cache)).toBe(0);
    expect(cache.calls.lock).toBe(2);
  });

  it('after the fill settled: aborting later changes nothing', async () => {
    const cache = testCache();
    const controller = new AbortController();
    expect(await getOrComputeWith(cache, 'k', { signal: controller.signal }, () => 'v')).toBe('v');
    controller.abort();
    expect(await getOrComputeWith(cache, 'k', {}, () => 'other')).toBe('v');
  });
});

describe('one signal shared by many calls (a request handler passing its request signal to every lookup)', () => {
  const abortListeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

  /** Collects the process warnings emitted while `run` runs (they are emitted on the next tick). */
  async function warningsDuring(run: () => Promise<void>): Promise<string[]> {
    const seen: string[] = [];
    const onWarning = (warning: Error) => seen.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      await run();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    return seen;
  }

  it('twenty concurrent misses, twenty joiners and twenty slow reads keep one listener on it; no leak warning', async () => {
    const controller = new AbortController();
    const { signal } = controller;
    const gate = deferred<string>();
    const warnings = await warningsDuring(async () => {
      const cache = testCache();
      const misses = Array.from({ length: 20 }, (_, i) =>
        getOrComputeWith(cache, `miss-${i}`, { signal }, () => gate.promise),
      );
      const joiners = Array.from({ length: 20 }, () =>
        getOrComputeWith(cache, 'miss-0', { signal }, () => 'unused'),
      );
      const slow = testCache();
      const read = deferred<undefined>();
      slow.get = () => read.promise;
      const reads = Array.from({ length: 20 }, (_, i) =>
        getOrComputeWith(slow, `read-${i}`, { signal }, () => 'read'),
      );
      expect(abortListeners(signal)).toBe(1);
      gate.resolve('v');
      read.resolve(undefined);
      expect(await Promise.all([...misses, ...joiners])).toEqual(Array(40).fill('v'));
      expect(await Promise.all(reads)).toEqual(Array(20).fill('read'));
      // Every call that settled stopped listening: nothing is left on the user's signal.
      expect(abortListeners(signal)).toBe(0);
    });
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  });

  it('its abort releases every one of them with its reason, and abandons only fills nobody else waits for', async () => {
    const controller = new AbortController();
    const { signal } = controller;
    const cache = testCache();
    const fillSignals: AbortSignal[] = [];
    const never = (ctx: { signal: AbortSignal }) => {
      fillSignals.push(ctx.signal);
      return new Promise<string>(() => {});
    };
    const gate = deferred<string>();
    const callers = Array.from({ length: 15 }, (_, i) =>
      settle(getOrComputeWith(cache, `k${i}`, { signal }, never)),
    );
    const kept = settle(getOrComputeWith(cache, 'kept', {}, () => gate.promise));
    const leaving = settle(getOrComputeWith(cache, 'kept', { signal }, () => 'unused'));
    const reason = new Error('request gone');
    controller.abort(reason);
    for (const result of await Promise.all([...callers, leaving])) {
      expect(result).toEqual({ ok: false, error: reason });
    }
    expect(fillSignals.every((s) => s.aborted)).toBe(true);
    gate.resolve('still here');
    expect(await kept).toEqual({ ok: true, value: 'still here' });
    expect(abortListeners(signal)).toBe(0);
  });

  it('on isolated requests (workerd), joiners watching a fill share the one listener too', async () => {
    configure({ isolatedRequests: true });
    try {
      const controller = new AbortController();
      const { signal } = controller;
      const cache = testCache();
      const gate = deferred<string>();
      const leader = getOrComputeWith(cache, 'k', {}, () => gate.promise);
      const joiners = Array.from({ length: 15 }, () =>
        settle(getOrComputeWith(cache, 'k', { signal }, () => 'unused')),
      );
      expect(abortListeners(signal)).toBe(1);
      controller.abort(new Error('left'));
      for (const result of await Promise.all(joiners)) expect(result.ok).toBe(false);
      expect(abortListeners(signal)).toBe(0);
      gate.resolve('v');
      expect(await leader).toBe('v');
    } finally {
      configure({ isolatedRequests: false });
    }
  });
});
