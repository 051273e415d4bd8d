import * as v from 'valibot';
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { type Cache, type GetOrComputeOptions, getOrComputeWith, getValue } from '../src/index.js';

declare const cache: Cache;

describe('checkValue types', () => {
  it("with a zod schema, the result is the schema's output type", () => {
    const User = z.object({ id: z.string(), age: z.number() });
    expectTypeOf(
      getOrComputeWith(cache, 'k', { checkValue: User }, () => ({ id: 'a', age: 1 })),
    ).toEqualTypeOf<Promise<{ id: string; age: number }>>();
    // A transform: the fill returns the input, callers get the output.
    const Length = z.string().transform((text) => text.length);
    expectTypeOf(getOrComputeWith(cache, 'k', { checkValue: Length }, () => 'abc')).toEqualTypeOf<
      Promise<number>
    >();
  });

  it("with a valibot schema, too, and the fill's stale value is typed by it", () => {
    const Count = v.object({ count: v.number() });
    const result = getOrComputeWith(cache, 'k', { ttl: '1m', checkValue: Count }, ({ stale }) => {
      expectTypeOf(stale).toEqualTypeOf<{ count: number } | undefined>();
      return { count: 1 };
    });
    expectTypeOf(result).toEqualTypeOf<Promise<{ count: number }>>();
  });

  it('options typed as GetOrComputeOptions still compile (the general overload)', () => {
    const options: GetOrComputeOptions = { ttl: '1m', checkValue: z.string() };
    expectTypeOf(getOrComputeWith(cache, 'k', options, () => 'x')).toEqualTypeOf<Promise<string>>();
  });

  it('with a function, the type comes from the fill', () => {
    expectTypeOf(
      getOrComputeWith(cache, 'k', { checkValue: (value) => typeof value === 'number' }, () => 42),
    ).toEqualTypeOf<Promise<number>>();
  });

  it('getValue infers from a schema, and stays unknown without one', () => {
    expectTypeOf(getValue(cache, 'k', { checkValue: z.array(z.string()) })).toEqualTypeOf<
      Promise<string[] | undefined>
    >();
    expectTypeOf(getValue(cache, 'k')).toEqualTypeOf<Promise<unknown>>();
    expectTypeOf(getValue<number>(cache, 'k')).toEqualTypeOf<Promise<number | undefined>>();
  });

  it('tags are a readonly string array', () => {
    const tags = ['a', 'b'] as const;
    getOrComputeWith(cache, 'k', { tags }, () => 1);
    // @ts-expect-error tags are strings
    getOrComputeWith(cache, 'k', { tags: [1] }, () => 1);
  });
});
