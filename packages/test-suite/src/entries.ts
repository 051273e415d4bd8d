import type { CacheEntry } from '@stampede/core';
import { expect } from 'vitest';

/** An entry created at `createdAt`, fresh for `ttl` and stale for `grace` more (forever without `ttl`). */
export function entry(value: unknown, createdAt: number, ttl: number | undefined, grace = 0): CacheEntry {
  const freshUntil = ttl === undefined ? Number.POSITIVE_INFINITY : createdAt + ttl;
  const staleUntil = ttl === undefined ? Number.POSITIVE_INFINITY : freshUntil + grace;
  return { value, createdAt, freshUntil, staleUntil };
}

/** Keys that break naive escaping, hash tags or line-based protocols. */
export const ODD_KEYS: readonly string[] = [
  'with space',
  'line\nbreak',
  'tab\tand\r\ncrlf',
  'unicode: héllo 🚀 世界',
  '{braces}',
  'a{b}c',
  '{}',
  'colon:separated:key',
  '*?[glob]',
  'k'.repeat(1_000),
];

/**
 * Pairs of keys a careless adapter maps to one stored name: differing only in case, Unicode form
 * (NFC and NFD of the same text), whitespace, a trailing space, past a 250-character limit or far
 * past any (100,000 characters: a key cut at 512 or 64K), in a lone surrogate (which UTF-8 turns
 * into U+FFFD either way), or named like another key's lock. Keys are exact strings: each pair
 * holds two different values.
 */
export const NEAR_KEYS: readonly (readonly [string, string])[] = [
  ['Key', 'key'],
  ['caf\u00e9', 'cafe\u0301'],
  ['a b', 'a_b'],
  ['k', 'k '],
  [`${'x'.repeat(300)}1`, `${'x'.repeat(300)}2`],
  [`${'x'.repeat(100_000)}1`, `${'x'.repeat(100_000)}2`],
  ['k\uD800', 'k\uDFFF'],
  ['user', 'user:lock'],
];

/**
 * Pairs of tags a careless adapter maps to one record: differing only in case, Unicode form, or a
 * lone surrogate. Tags are exact strings, as keys are: invalidating one leaves the other's entries.
 */
export const NEAR_TAGS: readonly (readonly [string, string])[] = [
  ['Tag', 'tag'],
  ['caf\u00e9', 'cafe\u0301'],
  ['k\uD800', 'k\uDFFF'],
];

/** Values a user caches, including the falsy ones a careless adapter reads back as a miss. */
export const VALUES: readonly [string, unknown][] = [
  ['null', null],
  ['zero', 0],
  ['false', false],
  ['empty string', ''],
  ['negative float', -12.5],
  ['unicode string', 'héllo 🚀, world'],
  ['array', [1, 'two', { three: 3 }, null]],
  ['nested object', { a: { b: { c: [1, 2, 3] } }, d: 'x|y|z', e: true }],
];

// How far two instances may disagree on an entry's times: an adapter that stores times on the
// backend's clock hands them back on this process's clock through its own estimate of the offset.
const CLOCK_TOLERANCE = 50;

/**
 * Asserts that `read`, as another instance returns it, is `written`: the same value, and times
 * within a few milliseconds (each instance converts them with its own clock-offset estimate).
 */
export function expectReplicated(read: CacheEntry | undefined, written: CacheEntry): void {
  expect(read?.value).toEqual(written.value);
  for (const field of ['createdAt', 'freshUntil', 'staleUntil'] as const) {
    const got = read?.[field] ?? Number.NaN;
    // Equal covers Infinity (an entry that never expires), where a difference would be NaN.
    const drift = got === written[field] ? 0 : Math.abs(got - written[field]);
    expect(drift, field).toBeLessThanOrEqual(CLOCK_TOLERANCE);
  }
}

/**
 * Asserts that `read`, as the instance that wrote it returns it, is `written`: exactly, or (for a
 * cache that declares `serverClock`) with all three times shifted together by at most
 * {@link CLOCK_TOLERANCE} ms, the durations between them and everything else exact.
 */
export function expectRoundTrip(
  read: CacheEntry | undefined,
  written: CacheEntry,
  serverClock: boolean | undefined,
): void {
  if (serverClock !== true || read === undefined) {
    expect(read).toEqual(written);
    return;
  }
  const shift = read.createdAt - written.createdAt;
  expect(Math.abs(shift), 'createdAt').toBeLessThanOrEqual(CLOCK_TOLERANCE);
  expect(read).toEqual({
    ...written,
    createdAt: written.createdAt + shift,
    freshUntil: written.freshUntil + shift,
    staleUntil: written.staleUntil + shift,
  });
}
