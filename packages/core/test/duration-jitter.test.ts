import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Duration, toMilliseconds } from '../src/adapter.js';
import { jitteredTtl } from '../src/index.js';

describe('Duration', () => {
  it.each([
    [250, 250],
    [0, 0],
    ['250ms', 250],
    ['30s', 30_000],
    ['1.5s', 1_500],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
  ] as const)('%s is %d ms', (input, ms) => {
    expect(toMilliseconds(input, 'ttl')).toBe(ms);
  });

  it.each(['', 's', '5', '-5s', '5 minutes', '1e3ms', 'NaNs'])(
    "'%s' is a RangeError naming the argument",
    (bad) => {
      expect(() => toMilliseconds(bad as '5s', 'options.lockTtl')).toThrow(/options\.lockTtl/);
      expect(() => toMilliseconds(bad as '5s', 'x')).toThrow(RangeError);
    },
  );

  it('refuses a string of digits too large for a number, instead of reading it as forever', () => {
    const huge = `${'9'.repeat(400)}s` as Duration;
    expect(() => toMilliseconds(huge, 'ttl')).toThrow(RangeError);
    expect(() => toMilliseconds(huge, 'ttl')).toThrow(/ttl is too large/);
  });
});

describe('jitteredTtl', () => {
  it('jitteredTtl(300_000, 0.2) is uniform in [240 000, 360 000]', () => {
    const samples = Array.from({ length: 20_000 }, () => jitteredTtl(300_000, 0.2));
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(240_000);
    expect(Math.max(...samples)).toBeLessThanOrEqual(360_000);
    // Uniform: each fifth of the range holds about a fifth of the samples.
    const bins = new Map<number, number>();
    for (const s of samples) {
      const bin = Math.min(4, Math.floor((s - 240_000) / 24_000));
      bins.set(bin, (bins.get(bin) ?? 0) + 1);
    }
    expect(bins.size).toBe(5);
    for (const count of bins.values()) expect(Math.abs(count - 4_000)).toBeLessThan(400);
  });

  it('stays in range for any base and fraction', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 ** 9 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (base, f) => {
          const ttl = jitteredTtl(base, f);
          return ttl >= base * (1 - f) - 1e-6 && ttl <= base * (1 + f) + 1e-6;
        },
      ),
    );
  });

  it('accepts string bases and a zero fraction', () => {
    expect(jitteredTtl('5m', 0)).toBe(300_000);
  });
});
