import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { getOrComputeWith, inFlightCount, resetStats } from '../src/index.js';
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
