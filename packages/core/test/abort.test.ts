import { beforeEach, describe, expect, it } from 'vitest';
import { getOrComputeWith, inFlightCount, resetStats } from '../src/index.js';
import { deferred, flush, settle, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
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
