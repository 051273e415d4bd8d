import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CacheEntry,
  decodeEnvelope,
  decodeTag,
  encodeEnvelope,
  encodeTag,
  integerText,
  jsonSerializer,
  type LegacySerializer,
  parseValue,
  roundTripValue,
  type Serializer,
  stringifyValue,
  toSerializer,
} from '../src/adapter.js';
import { formatMark } from '../src/envelope.js';

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

  it('takes a pluggable { stringify, parse } serializer, and the older { serialize, deserialize } shape', () => {
    const upper: Serializer = {
      stringify: (v) => String(v).toUpperCase(),
      parse: (t) => t.toLowerCase(),
    };
    const text = encodeEnvelope({ value: 'abc', createdAt: 1, freshUntil: 2, staleUntil: 2 }, upper);
    // Its format's mark heads the payload (see formatMark).
    expect(text).toMatch(/\|~[0-9a-f]{8}~ABC$/);
    expect(decodeEnvelope(text, upper).value).toBe('abc');
    const legacy: LegacySerializer = {
      serialize: (v) => String(v).toUpperCase(),
      deserialize: (t) => t.toLowerCase(),
    };
    expect(encodeEnvelope({ value: 'abc', createdAt: 1, freshUntil: 2, staleUntil: 2 }, legacy)).toBe(text);
    expect(decodeEnvelope(text, legacy).value).toBe('abc');
    expect(
      decodeEnvelope(encodeEnvelope({ value: [1], createdAt: 1, freshUntil: 2, staleUntil: 2 }, JSON)).value,
    ).toEqual([1]);
  });

  it('toSerializer takes JSON-shaped objects and classes as they are, and names the option otherwise', () => {
    expect(toSerializer(JSON)).toBe(JSON);
    expect(toSerializer(undefined)).toBe(jsonSerializer);
    // biome-ignore lint/complexity/noStaticOnlyClass: superjson's default export is a class like this
    class WithStatics {
      static prefix = '>';
      static stringify(value: unknown): string {
        return `${WithStatics.prefix}${JSON.stringify(value)}`;
      }
      static parse(text: string): unknown {
        return JSON.parse(text.slice(1));
      }
    }
    expect(toSerializer(WithStatics)).toBe(WithStatics);
    expect(roundTripValue({ a: 1 }, WithStatics)).toEqual({ a: 1 });
    expect(() => toSerializer({}, 'options.serializer')).toThrow(
      new TypeError(
        'options.serializer must have stringify and parse functions (JSON, superjson and devalue fit as they are)',
      ),
    );
    expect(() => toSerializer(null, 'options.serializer')).toThrow(TypeError);
  });

  it('round-trips a value as a text cache gives it back, and refuses what it cannot carry', () => {
    const date = new Date('2024-01-02T03:04:05.000Z');
    expect(
      roundTripValue({ date, nan: Number.NaN, map: new Map([[1, 2]]), zero: -0, list: [undefined] }),
    ).toEqual({
      date: '2024-01-02T03:04:05.000Z',
      nan: null,
      map: {},
      zero: 0,
      list: [null],
    });
    expect(() => roundTripValue(10n)).toThrow(TypeError);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => roundTripValue(cycle)).toThrow(TypeError);
    // JSON.stringify(undefined) and of a function is undefined: not storable.
    expect(() => roundTripValue(() => 1)).toThrow(TypeError);
  });

  it('writes any finite time as plain digits and reads it back (1e21, Number.MAX_VALUE)', () => {
    for (const big of [1e21, 2 ** 60 + 2 ** 10, Number.MAX_VALUE]) {
      const entry = { value: 'v', createdAt: 1_700_000_000_000, freshUntil: big, staleUntil: big };
      const text = encodeEnvelope(entry);
      expect(text).toMatch(/^s1\|1700000000000\|\d+\|\d+\|"v"$/);
      expect(decodeEnvelope(text)).toEqual(entry);
    }
    expect(integerText(1e21)).toBe('1000000000000000000000');
    expect(integerText(-0.4)).toBe('0');
    expect(Number(integerText(Number.MAX_VALUE))).toBe(Number.MAX_VALUE);
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

describe('stringifyValue', () => {
  it('names what the serializer cannot represent, with its article', () => {
    expect(() => stringifyValue({ toJSON: () => undefined })).toThrow(
      new TypeError('the serializer cannot represent an object (it returned undefined)'),
    );
    expect(() => stringifyValue(() => 1)).toThrow(/cannot represent a function: a cached value is data/);
    expect(() => stringifyValue(Symbol('s'))).toThrow(/cannot represent a symbol/);
  });

  it("refuses a function under a serializer that would write one as '{}' (superjson), which reads back as undefined", () => {
    const superjsonLike: Serializer = {
      stringify: (value) => JSON.stringify({ json: typeof value === 'function' ? undefined : value }),
      parse: (text) => (JSON.parse(text) as { json?: unknown }).json,
    };
    expect(() => stringifyValue(() => 1, superjsonLike)).toThrow(TypeError);
  });

  it('refuses an asynchronous serializer, and its rejected promise does not end the process', async () => {
    const asyncStringify = {
      stringify: (_value: unknown) => Promise.reject(new TypeError('Do not know how to serialize a BigInt')),
      parse: JSON.parse,
    } as unknown as Serializer;
    expect(() => stringifyValue({ n: 1 }, asyncStringify)).toThrow(/stringify returned a promise/);
    const asyncParse = { stringify: JSON.stringify, parse: async () => ({}) } as unknown as Serializer;
    expect(() => parseValue('{}', asyncParse)).toThrow(/parse returned a promise/);
    const never = { stringify: JSON.stringify, parse: () => new Promise(() => {}) } as unknown as Serializer;
    expect(() => decodeEnvelope('s1|1|2|3|{}', never)).toThrow(/parse returned a promise/);
    // Unhandled rejections fail the run: give them a turn.
    await new Promise((resolve) => setTimeout(resolve, 10));
  });
});

describe("an entry written with another serializer reads as a decode error, not another format's value", () => {
  const entry = { value: [1, 2], createdAt: 1, freshUntil: 2, staleUntil: 3 };
  // Two formats JSON.parse also reads: superjson's wrapper, and a devalue-like flattened array.
  const wrapped: Serializer = {
    stringify: (value) => JSON.stringify({ json: value }),
    parse: (text) => (JSON.parse(text) as { json: unknown }).json,
  };
  const flattened: Serializer = {
    stringify: (value) => JSON.stringify([value]),
    parse: (text) => (JSON.parse(text) as unknown[])[0],
  };

  it('each pair of formats refuses the other, both ways, and each reads its own', () => {
    const formats = [undefined, wrapped, flattened];
    for (const writer of formats) {
      const text = encodeEnvelope(entry, writer);
      for (const reader of formats) {
        if (reader === writer) expect(decodeEnvelope(text, reader)).toEqual(entry);
        else expect(() => decodeEnvelope(text, reader)).toThrow(/written with another serializer/);
      }
    }
  });

  it("JSON's own text carries no mark: JSON, the default and a serializer that writes JSON's text read each other", () => {
    const revivingJson: Serializer = { stringify: (v) => JSON.stringify(v), parse: (t) => JSON.parse(t) };
    expect(formatMark(undefined)).toBe('');
    expect(formatMark(JSON)).toBe('');
    expect(formatMark(revivingJson)).toBe('');
    expect(encodeEnvelope(entry)).toBe('s1|1|2|3|[1,2]');
    expect(decodeEnvelope(encodeEnvelope(entry, revivingJson), JSON)).toEqual(entry);
    // A marked payload is not JSON: an older release's JSON reader misses it too.
    expect(() => JSON.parse(encodeEnvelope(entry, wrapped).slice('s1|1|2|3|'.length))).toThrow();
  });

  it('a serializer whose text differs between two calls (a random IV) gets no mark, and still round-trips', () => {
    let n = 0;
    const salted: Serializer = {
      stringify: (value) => JSON.stringify({ salt: n++, value }),
      parse: (text) => (JSON.parse(text) as { value: unknown }).value,
    };
    expect(formatMark(salted)).toBe('');
    expect(decodeEnvelope(encodeEnvelope(entry, salted), salted)).toEqual(entry);
  });

  it('the mark depends only on what the serializer writes: two objects of one format share it', () => {
    const again: Serializer = { stringify: wrapped.stringify, parse: wrapped.parse };
    expect(formatMark(again)).toBe(formatMark(wrapped));
    expect(formatMark(wrapped)).toMatch(/^~[0-9a-f]{8}~$/);
    expect(formatMark(flattened)).not.toBe(formatMark(wrapped));
  });
});

describe('tagged envelopes', () => {
  const odd = ['user:42', 'a|b,c', '{x}', '%25', '%u0041', 'héllo 🚀', '\uD800lone'];

  it('round-trips tags, odd ones included, and keeps untagged entries in the first format', () => {
    const entry = { value: { n: 1 }, createdAt: 1_000, freshUntil: 2_000, staleUntil: 3_000, tags: odd };
    const text = encodeEnvelope(entry);
    expect(text.startsWith('s1t|1000|2000|3000|')).toBe(true);
    expect(decodeEnvelope(text)).toEqual(entry);
    const plain = { value: 'v', createdAt: 1, freshUntil: 2, staleUntil: 3 };
    expect(encodeEnvelope(plain)).toBe('s1|1|2|3|"v"');
    expect(encodeEnvelope({ ...plain, tags: [] })).toBe('s1|1|2|3|"v"');
    expect('tags' in decodeEnvelope('s1|1|2|3|"v"')).toBe(false);
  });

  it('writes s1, s2, s1t or s2t by whether the entry has a delta and tags, and reads all four back', () => {
    const times = { createdAt: 1_000, freshUntil: 2_000, staleUntil: 3_000 };
    const cases = [
      [{ value: 'v', ...times }, 's1|1000|2000|3000|"v"'],
      [{ value: 'v', ...times, delta: 25 }, 's2|1000|2000|3000|25|"v"'],
      [{ value: 'v', ...times, tags: ['a', 'b|c'] }, 's1t|1000|2000|3000|a,b%7Cc|"v"'],
      [{ value: 'v', ...times, delta: 25, tags: ['a', 'b|c'] }, 's2t|1000|2000|3000|25|a,b%7Cc|"v"'],
    ] as const;
    for (const [entry, text] of cases) {
      expect(encodeEnvelope(entry)).toBe(text);
      expect(decodeEnvelope(text)).toEqual(entry);
    }
    // A payload that holds the separators is read whole, after the header.
    const tricky = { value: 'x|y,z|', ...times, delta: 0, tags: ['t'] };
    expect(decodeEnvelope(encodeEnvelope(tricky))).toEqual(tricky);
  });

  it('refuses a tagged header with a bad delta or cut short', () => {
    for (const text of [
      's2t|1|2|3|x|a|"v"',
      's2t|1|2|3|-1|a|"v"',
      's2t|1|2|3|5|a',
      's1t|1|2|3|a',
      's3t|1|2|3|a|"v"',
    ]) {
      expect(() => decodeEnvelope(text), text).toThrow(TypeError);
    }
  });

  it('refuses an entry without a creation time (it would be newer than every write) and a delta beyond any number', () => {
    // An empty createdAt reads as Infinity: the never-older rule would then refuse every later write.
    expect(() => decodeEnvelope('s1||2|3|"v"')).toThrow(
      new TypeError('stampede envelope: inconsistent times'),
    );
    // 400 digits are a number past Infinity: an early refresh would fire on every hit.
    expect(() => decodeEnvelope(`s2|1|2|3|${'9'.repeat(400)}|"v"`)).toThrow(
      new TypeError('stampede envelope: bad delta'),
    );
    expect(() => encodeEnvelope({ value: 1, createdAt: Number.NaN, freshUntil: 2, staleUntil: 3 })).toThrow(
      RangeError,
    );
    expect(() => integerText(Number.NaN)).toThrow(
      new RangeError('integerText needs a finite number; got NaN'),
    );
  });

  it('encodeTag is injective and leaves no separator or brace', () => {
    const encoded = odd.map(encodeTag);
    expect(new Set(encoded).size).toBe(odd.length);
    for (const text of encoded) expect(text).not.toMatch(/[|,{}]/);
    expect(odd.map((tag) => decodeTag(encodeTag(tag)))).toEqual(odd);
  });
});
