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
