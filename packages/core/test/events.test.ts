import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type FillEvent,
  getOrCompute,
  getOrComputeWith,
  onStampedeEvent,
  resetStats,
  STAT_NAMES,
  type StampedeEvent,
  stats,
  statsByCache,
} from '../src/index.js';
import { Backend, settle, testCache } from './helpers.js';

let events: StampedeEvent[];
let off: () => void;
beforeEach(() => {
  resetStats();
  events = [];
  off = onStampedeEvent((event) => events.push(event));
});
afterEach(() => {
  off();
  vi.useRealTimers();
});

describe('stats and events', () => {
  it('reports fills with their duration and outcome, never on hits', async () => {
    vi.useFakeTimers();
    const cache = testCache({ name: 'books' });
    const slow = getOrCompute(
      cache,
      'k',
      1_000,
      () => new Promise((resolve) => setTimeout(() => resolve(1), 250)),
    );
    await vi.advanceTimersByTimeAsync(250);
    await slow;
    await getOrCompute(cache, 'k', 1_000, () => 2);
    await settle(getOrCompute(cache, 'bad', 1_000, () => Promise.reject(new Error('x'))));
    const fills = events.filter((e): e is FillEvent => e.type === 'fill');
    expect(fills).toEqual([
      { type: 'fill', cache: 'books', key: 'k', durationMs: 250, outcome: 'ok', background: false },
      { type: 'fill', cache: 'books', key: 'bad', durationMs: 0, outcome: 'error', background: false },
    ]);
  });

  it('a fill whose every caller left still reports how it ended, and counts a failure', async () => {
    vi.useFakeTimers({ now: 0 });
    const cache = testCache({ name: 'left' });
    for (const [key, fails] of [
      ['ok', false],
      ['bad', true],
    ] as const) {
      const controller = new AbortController();
      const answer = settle(
        getOrComputeWith(cache, key, { ttl: 1_000, signal: controller.signal }, async () => {
          await new Promise((resolve) => setTimeout(resolve, 50));
          if (fails) throw new Error('db down');
          return 1;
        }),
      );
      await vi.advanceTimersByTimeAsync(10);
      controller.abort();
      expect(await answer).toMatchObject({ ok: false });
      await vi.advanceTimersByTimeAsync(50);
    }
    expect(events.filter((e) => e.type === 'fill')).toEqual([
      { type: 'fill', cache: 'left', key: 'ok', durationMs: 50, outcome: 'ok', background: false },
      { type: 'fill', cache: 'left', key: 'bad', durationMs: 50, outcome: 'error', background: false },
    ]);
    expect(statsByCache().left).toMatchObject({ fills: 2, fillFailures: 1, fillTimeouts: 0 });
  });

  it('a fillTimeout that passes during the lock wait ran no fill and emits no fill event', async () => {
    vi.useFakeTimers({ now: 0 });
    const backend = new Backend();
    backend.lock('k', 60_000);
    const cache = testCache({ backend, lock: true, name: 'waited' });
    const fill = vi.fn(() => 'mine');
    const answer = settle(
      getOrComputeWith(
        cache,
        'k',
        { distributedFillLock: true, fillTimeout: 50, lockWaitTimeout: 5_000 },
        fill,
      ),
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(await answer).toMatchObject({ ok: false });
    await vi.advanceTimersByTimeAsync(6_000);
    expect(fill).not.toHaveBeenCalled();
    expect(events.filter((e) => e.type === 'fill')).toEqual([]);
    expect(statsByCache().waited).toMatchObject({ fills: 0, fillTimeouts: 1, fillsCancelled: 1 });
  });

  it('reports lock waits with their duration and outcome', async () => {
    vi.useFakeTimers({ now: 0 });
    const backend = new Backend();
    backend.lock('k', 120);
    const cache = testCache({ backend, lock: true });
    const answer = getOrComputeWith(cache, 'k', { distributedFillLock: true }, () => 'mine');
    await vi.advanceTimersByTimeAsync(200);
    expect(await answer).toBe('mine');
    expect(events.find((e) => e.type === 'lock-wait')).toEqual({
      type: 'lock-wait',
      cache: 'test',
      key: 'k',
      durationMs: 150,
      outcome: 'acquired',
    });
  });

  it('keeps counters per cache name and sums them', async () => {
    const a = testCache({ name: 'a' });
    const b = testCache({ name: 'b' });
    await getOrCompute(a, 'k', 1_000, () => 1);
    await getOrCompute(a, 'k', 1_000, () => 1);
    await getOrCompute(b, 'k', 1_000, () => 1);
    const byCache = statsByCache();
    expect(byCache.a).toMatchObject({ hits: 1, misses: 1, fills: 1 });
    expect(byCache.b).toMatchObject({ hits: 0, misses: 1, fills: 1 });
    expect(stats()).toMatchObject({ hits: 1, misses: 2, fills: 2 });
    expect(Object.keys(stats()).sort()).toEqual([...STAT_NAMES].sort());
    resetStats();
    expect(Object.values(stats()).every((n) => n === 0)).toBe(true);
  });

  it('an unsubscribed listener hears nothing more', async () => {
    off();
    const cache = testCache();
    await getOrCompute(cache, 'k', 1_000, () => 1);
    expect(events).toEqual([]);
    off = () => {};
  });
});
