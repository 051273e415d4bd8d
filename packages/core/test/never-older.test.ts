import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { shouldReplace } from '../src/adapter.js';
import type { CacheEntry } from '../src/index.js';

const at = (createdAt: number, value: unknown = createdAt): CacheEntry => ({
  value,
  createdAt,
  freshUntil: createdAt + 1_000,
  staleUntil: createdAt + 2_000,
});

describe('shouldReplace: a write never replaces a newer entry', () => {
  it('writes over nothing', () => {
    expect(shouldReplace(undefined, at(5))).toBe(true);
  });

  it('writes over an older entry and refuses a newer one', () => {
    expect(shouldReplace(at(4), at(5))).toBe(true);
    expect(shouldReplace(at(6), at(5))).toBe(false);
  });

  it('gives a tie to the write (a setValue in the same millisecond as the fill it overrides lands)', () => {
    expect(shouldReplace(at(5, 'fill'), at(5, 'setValue'))).toBe(true);
  });

  it('looks only at createdAt, not at the freshness times or the value', () => {
    const longLived = { value: 'old', createdAt: 1, freshUntil: Infinity, staleUntil: Infinity };
    expect(shouldReplace(longLived, { value: 'new', createdAt: 2, freshUntil: 3, staleUntil: 3 })).toBe(true);
  });

  it('keeps the newest entry whatever order the writes arrive in', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1_000 }), { minLength: 1, maxLength: 30 }), (times) => {
        let stored: CacheEntry | undefined;
        for (const time of times) {
          const incoming = at(time);
          if (shouldReplace(stored, incoming)) stored = incoming;
        }
        expect(stored?.createdAt).toBe(Math.max(...times));
      }),
    );
  });
});
