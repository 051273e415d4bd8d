import { getOrCompute, getOrComputeWith, resetStats, stats } from '@stampede/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryCache } from '../src/index.js';

// A value must never be served as fresh more than about a millisecond past its freshUntil, whatever
// the caller's event-loop pattern: a clock cached until a timer clears it would stay at its first
// reading for as long as the caller never yields to timers.

afterEach(() => {
  vi.useRealTimers();
  resetStats();
});

/** Spins the CPU for `ms` without yielding to anything. */
function busyWait(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spinning on purpose: no timer, no microtask runs meanwhile
  }
}

describe('freshness follows the real clock', () => {
  it('a loop of awaited hits that never yields to timers still sees the value expire', async () => {
    const cache = createMemoryCache();
    let fills = 0;
    const fill = () => ++fills;
    const until = Date.now() + 300;
    while (Date.now() < until) await getOrCompute(cache, 'k', 20, fill);
    // 300 ms of a 20 ms ttl: about 15 expiries; a clock stuck at its first reading gives 1.
    expect(fills).toBeGreaterThanOrEqual(5);
  });

  it('a synchronous batch between two awaits does not keep the first reading', async () => {
    const cache = createMemoryCache();
    let fills = 0;
    const fill = () => ++fills;
    expect(await getOrCompute(cache, 'k', 10, fill)).toBe(1);
    busyWait(30);
    expect(await getOrCompute(cache, 'k', 10, fill)).toBe(2);
    busyWait(30);
    expect(await getOrComputeWith(cache, 'k', { ttl: 10 }, fill)).toBe(3);
  });

  it('the instant the clock passes freshUntil the value is a miss, with no timer run in between', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const cache = createMemoryCache();
    let fills = 0;
    const fill = () => ++fills;
    await getOrCompute(cache, 'k', 50, fill);
    // Move the clock without running any timer (a stretch of work that never yields to timers).
    vi.setSystemTime(1_000_049);
    expect(await getOrCompute(cache, 'k', 50, fill)).toBe(1);
    vi.setSystemTime(1_000_050);
    expect(await getOrCompute(cache, 'k', 50, fill)).toBe(2);
    vi.setSystemTime(1_000_100);
    expect(await getOrComputeWith(cache, 'k', { ttl: 50 }, fill)).toBe(3);
    expect(stats()).toMatchObject({ hits: 1, misses: 3, fills: 3 });
  });
});

describe('freshness with the coarse clock running (hits faster than 250,000 a second)', () => {
  const clock = (globalThis as Record<symbol, { clock: { control: Int32Array; seconds: Uint32Array } }>)[
    Symbol.for('@stampede/core/shared/v1')
  ]?.clock;
  const running = () => clock !== undefined && Atomics.load(clock.control, 0) === 1 && clock.seconds[0] !== 0;

  it('a loop of awaited hits that never yields to timers sees the value expire at its freshUntil', async () => {
    const cache = createMemoryCache();
    const warm = () => 0;
    const giveUpAt = Date.now() + 10_000;
    while (!running() && Date.now() < giveUpAt) {
      for (let i = 0; i < 4096; i++) await getOrCompute(cache, 'warm', '1h', warm);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(running()).toBe(true);
    let fills = 0;
    const fill = () => ++fills;
    // Beyond the coarse clock's 2 s margin, so that hits far from expiry read it; lru-cache's own
    // clock is cached until a timer runs, so the memory cache keeps the entry past its ttl.
    const ttl = 2_300;
    const firstSeen = new Map<number, number>();
    const servedLate: number[] = [];
    let hits = stats().hits;
    const until = Date.now() + 2 * ttl + 200;
    for (let before = Date.now(); before < until; before = Date.now()) {
      const value = await getOrCompute(cache, 'k', ttl, fill);
      const seen = firstSeen.get(value);
      if (seen === undefined) firstSeen.set(value, Date.now());
      const counted = stats().hits;
      if (counted > hits && seen !== undefined && before >= seen + ttl) servedLate.push(before - seen - ttl);
      hits = counted;
    }
    expect(servedLate).toEqual([]);
    expect(fills).toBeGreaterThanOrEqual(3);
    expect(running()).toBe(true);
  });
});
