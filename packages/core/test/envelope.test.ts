import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CacheEntry, decodeEnvelope, encodeEnvelope, type Serializer } from '../src/index.js';

const entryArb = fc.record({
  value: fc.jsonValue().filter((v) => v !== undefined),
  createdAt: fc.integer({ min: 0, max: 2 ** 45 }),
  ttl: fc.option(fc.integer({ min: 0, max: 10 ** 9 }), { nil: undefined }),
  grace: fc.integer({ min: 0, max: 10 ** 9 }),
});

function toEntry({
  value,
  createdAt,
  ttl,
  grace,
}: {
  value: unknown;
  createdAt: number;
  ttl: number | undefined;
  grace: number;
}): CacheEntry {
  if (ttl === undefined) {
    return { value, createdAt, freshUntil: Number.POSITIVE_INFINITY, staleUntil: Number.POSITIVE_INFINITY };
  }
  return { value, createdAt, freshUntil: createdAt + ttl, staleUntil: createdAt + ttl + grace };
}

describe('envelope', () => {
  it('round-trips any JSON value with its times', () => {
    fc.assert(
      fc.property(entryArb, (raw) => {
        const entry = toEntry(raw);
        const asJson: unknown = JSON.parse(JSON.stringify(entry.value));
        expect(decodeEnvelope(encodeEnvelope(entry))).toEqual({ ...entry, value: asJson });
      }),
    );
  });

  it('is never valid JSON (so auto-deserialising clients hand it back as text)', () => {
    const text = encodeEnvelope({ value: { a: 1 }, createdAt: 1, freshUntil: 2, staleUntil: 3 });
    expect(() => JSON.parse(text)).toThrow();
  });

  it('takes a pluggable serializer', () => {
    const upper: Serializer = {
      serialize: (v) => String(v).toUpperCase(),
      deserialize: (t) => t.toLowerCase(),
    };
    const text = encodeEnvelope({ value: 'abc', createdAt: 1, freshUntil: 2, staleUntil: 2 }, upper);
    expect(text.endsWith('|ABC')).toBe(true);
    expect(decodeEnvelope(text, upper).value).toBe('abc');
  });

  it('throws a TypeError (never anything else) for random text and foreign JSON', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
          fc.string().map((s) => `s1|${s}`),
          fc
            .tuple(fc.string(), fc.string(), fc.string(), fc.string())
            .map((parts) => `s1|${parts.join('|')}`),
          fc.uint8Array().map((bytes) => new TextDecoder().decode(bytes)),
        ),
        (text) => {
          try {
            const entry = decodeEnvelope(text);
            // Anything that decodes must be a well-formed entry.
            expect(entry.value).not.toBeUndefined();
            expect(entry.staleUntil).toBeGreaterThanOrEqual(entry.freshUntil);
          } catch (error) {
            expect(error instanceof TypeError || error instanceof SyntaxError).toBe(true);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('rejects values JSON cannot carry', () => {
    expect(() => encodeEnvelope({ value: 10n, createdAt: 1, freshUntil: 2, staleUntil: 2 })).toThrow(
      TypeError,
    );
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => encodeEnvelope({ value: cyclic, createdAt: 1, freshUntil: 2, staleUntil: 2 })).toThrow(
      TypeError,
    );
    expect(() => encodeEnvelope({ value: () => 1, createdAt: 1, freshUntil: 2, staleUntil: 2 })).toThrow(
      TypeError,
    );
    expect(() => decodeEnvelope(42)).toThrow(TypeError);
  });
});
