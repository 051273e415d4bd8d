import { describe, expect, it } from 'vitest';
import { entry, expectRoundTrip } from '../src/entries.js';

describe('expectRoundTrip', () => {
  const written = { ...entry({ n: 1 }, 1_000_000, 60_000, 30_000), delta: 12, tags: ['t'] };
  const shifted = (by: number) => ({
    ...written,
    createdAt: written.createdAt + by,
    freshUntil: written.freshUntil + by,
    staleUntil: written.staleUntil + by,
  });

  it('wants the entry exactly unless the cache declares serverClock', () => {
    expect(() => expectRoundTrip({ ...written }, written, false)).not.toThrow();
    expect(() => expectRoundTrip(shifted(1), written, false)).toThrow();
    expect(() => expectRoundTrip(undefined, written, true)).toThrow();
  });

  it('with serverClock, takes the times shifted together by up to 50 ms, and nothing else', () => {
    expect(() => expectRoundTrip(shifted(-50), written, true)).not.toThrow();
    expect(() => expectRoundTrip(shifted(7), written, true)).not.toThrow();
    expect(() => expectRoundTrip(shifted(51), written, true)).toThrow();
    expect(() => expectRoundTrip({ ...shifted(3), freshUntil: written.freshUntil }, written, true)).toThrow();
    expect(() => expectRoundTrip({ ...shifted(3), delta: 13 }, written, true)).toThrow();
    expect(() => expectRoundTrip({ ...shifted(3), value: { n: 2 } }, written, true)).toThrow();
    const forever = entry('x', 1_000_000, undefined);
    expect(() => expectRoundTrip({ ...forever, createdAt: 1_000_004 }, forever, true)).not.toThrow();
  });
});
