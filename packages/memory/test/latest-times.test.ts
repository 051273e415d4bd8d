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

  it('forgets in recording order over many records, re-recorded names moving to the newest, also after clear()', () => {
    const forgotten: number[] = [];
    const times = createLatestTimes(3, (at) => forgotten.push(at));
    for (let i = 1; i <= 5; i++) times.record(`n${i}`, i);
    expect(forgotten).toEqual([1, 2]);
    // n3 recorded again: n4 is now the oldest.
    times.record('n3', 6);
    times.record('n6', 7);
    expect(forgotten).toEqual([1, 2, 4]);
    times.record('n7', 8);
    expect(forgotten).toEqual([1, 2, 4, 5]);
    times.clear();
    for (let i = 10; i <= 14; i++) times.record(`m${i}`, i);
    expect(forgotten).toEqual([1, 2, 4, 5, 10, 11]);
    expect([times.peek('m12'), times.peek('m14'), times.peek('n3')]).toEqual([12, 14, undefined]);
  });
});
