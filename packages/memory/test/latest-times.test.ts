import { describe, expect, it } from 'vitest';
import { createLatestTimes } from '../src/latest-times.js';

describe('createLatestTimes', () => {
  it('keeps the latest time of each name, forgetting the oldest recorded past max', () => {
    const forgotten: number[] = [];
    const times = createLatestTimes(2, (at) => forgotten.push(at));
    times.record('a', 10);
    times.record('b', 20);
    // An earlier time never replaces a later one; recording again makes 'a' the newest.
    times.record('a', 5);
    expect(times.peek('a')).toBe(10);
    times.record('c', 30);
    expect(forgotten).toEqual([20]);
    expect(times.peek('b')).toBeUndefined();
    expect(times.peek('a')).toBe(10);
    expect(times.peek('c')).toBe(30);
    times.clear();
    expect(times.peek('a')).toBeUndefined();
    expect(forgotten).toEqual([20]);
  });
});
