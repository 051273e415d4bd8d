import { describe, expect, it } from 'vitest';
import { redisKeys } from '../src/index.js';

// Redis Cluster's rule: hash the part between the first '{' and the first '}' after it, if non-empty.
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

const KEYS = [
  'plain',
  'a{b}c',
  '{braces}',
  '{}',
  '}{',
  '{{}}',
  '%7B',
  '%',
  'colon:key',
  'héllo 🚀',
  '*?[glob]',
];
const PREFIXES = ['stampede:', '', 'app{1}:', 'open{:', 'close}:', '}{', 'a{{}'];

describe('redisKeys', () => {
  it.each(PREFIXES)('puts the value, lock and channel of a key in one slot (prefix %j)', (prefix) => {
    for (const key of KEYS) {
      const keys = redisKeys(prefix, key);
      expect(hashTag(keys.lock)).toBe(hashTag(keys.value));
      expect(hashTag(keys.channel)).toBe(hashTag(keys.value));
    }
  });

  it('keeps braces in a user key from faking or breaking the hash tag', () => {
    expect(redisKeys('stampede:', 'a{b}c').value).toBe('stampede:{a%7Bb%7Dc}');
    expect(hashTag(redisKeys('stampede:', 'a{b}c').value)).toBe('a%7Bb%7Dc');
    expect(hashTag(redisKeys('stampede:', '{}').value)).toBe('%7B%7D');
    expect(hashTag(redisKeys('stampede:', 'x}y').lock)).toBe('x%7Dy');
  });

  it('names a prefix or key of the wrong kind, and an empty key (it would open the empty tag {})', () => {
    expect(() => redisKeys(5 as never, 'k')).toThrow(new TypeError('prefix must be a string; got number'));
    expect(() => redisKeys('p:', '')).toThrow(
      new TypeError('key must be a non-empty string; got an empty string'),
    );
    expect(() => redisKeys('p:', null as never)).toThrow(
      new TypeError('key must be a non-empty string; got null'),
    );
  });

  it('refuses a prefix that opens an empty hash tag', () => {
    expect(() => redisKeys('{}', 'k')).toThrow(RangeError);
    expect(() => redisKeys('x{}{y}', 'k')).toThrow(RangeError);
  });

  it('never maps two keys (or a value and another key lock) to the same name', () => {
    const random = () =>
      Array.from(
        { length: 1 + Math.floor(Math.random() * 6) },
        () => '{}%:ab7D'[Math.floor(Math.random() * 8)],
      ).join('');
    const keys = new Set([...KEYS, ...Array.from({ length: 2_000 }, random)]);
    const names = new Map<string, string>();
    for (const key of keys) {
      for (const name of Object.values(redisKeys('p:', key))) {
        expect(names.get(name) ?? key).toBe(key);
        names.set(name, key);
      }
    }
    expect(names.size).toBe(keys.size * 3);
  });
});
