// Every entry the core builds (a fill's, a setValue's, a decoded one, a checkValue output, a
// fail-safe re-arm, a tiered copy) has one of four fixed shapes: the required fields in order, then
// `delta` and `tags` only when present. A spread copy (`{ ...entry, value }`) got a hidden class of
// its own in V8 and made every later hit on it some 40 ns slower (the bench's tiered L1 hit went
// from 1.2x to 2x an lru-cache get); these tests pin the shapes, the bench the cost.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { changeEntry, createEntry, decodeEnvelope, encodeEnvelope } from '../src/adapter.js';
import { getOrCompute } from '../src/index.js';
import { testCache } from './helpers.js';

const REQUIRED = ['value', 'createdAt', 'freshUntil', 'staleUntil'];

describe('entries have fixed shapes', () => {
  it('createEntry: delta and tags only when given, in a fixed order', () => {
    expect(Object.keys(createEntry(1, 1, 2, 3))).toEqual(REQUIRED);
    expect(Object.keys(createEntry(1, 1, 2, 3, 5))).toEqual([...REQUIRED, 'delta']);
    expect(Object.keys(createEntry(1, 1, 2, 3, undefined, ['a']))).toEqual([...REQUIRED, 'tags']);
    expect(Object.keys(createEntry(1, 1, 2, 3, 5, ['a']))).toEqual([...REQUIRED, 'delta', 'tags']);
  });

  it('changeEntry keeps the shape and replaces only what it is given', () => {
    const entry = createEntry({ a: 1 }, 10, 20, 30, 4, ['t']);
    const changed = changeEntry(entry, { freshUntil: 25, staleUntil: 35 });
    expect(changed).toStrictEqual({
      value: { a: 1 },
      createdAt: 10,
      freshUntil: 25,
      staleUntil: 35,
      delta: 4,
      tags: ['t'],
    });
    expect(Object.keys(changed)).toEqual(Object.keys(entry));
    expect(changed).not.toBe(entry);
    expect(entry.freshUntil).toBe(20);
    // A value may be replaced by anything, null included; tags may be dropped.
    expect(changeEntry(entry, { value: null }).value).toBeNull();
    expect(Object.keys(changeEntry(entry, { tags: undefined }))).toEqual([...REQUIRED, 'delta']);
    expect(Object.keys(changeEntry(createEntry(1, 1, 2, 3), { createdAt: 0 }))).toEqual(REQUIRED);
  });

  it('a decoded envelope has the shape of the entry that was encoded', () => {
    for (const entry of [
      createEntry('v', 1, 2, 3),
      createEntry('v', 1, 2, 3, 7),
      createEntry('v', 1, 2, 3, undefined, ['x', 'y']),
      createEntry('v', 1, 2, 3, 7, ['x']),
    ]) {
      const decoded = decodeEnvelope(encodeEnvelope(entry));
      expect(decoded).toStrictEqual(entry);
      expect(Object.keys(decoded)).toEqual(Object.keys(entry));
    }
  });
});

// A hit keeps the promise it hands out on the entry (a non-enumerable symbol property) so that the
// next hit of that entry returns it again. createEntry makes room for it up front: with the property
// added by the first hit, every entry had a second hidden class, and code compiled for read entries
// was thrown away at the first read of each new one (a key's first reads after a refill or expiry).
describe('the promise a hit keeps on its entry', () => {
  it('does not change the hidden class of an entry of any shape, nor of a filled one', () => {
    const fixture = fileURLToPath(new URL('./fixtures/entry-maps.mjs', import.meta.url));
    const report = JSON.parse(
      execFileSync(process.execPath, ['--allow-natives-syntax', fixture], {
        encoding: 'utf8',
        timeout: 20_000,
      }),
    );
    for (const shape of ['plain', 'delta', 'tags', 'deltaTags']) {
      expect(report[shape], shape).toEqual({ served: true, sameMap: true });
    }
    expect(report.filled).toEqual({ sameMap: true });
  });

  it('is not copied with the entry: a spread copy with another value serves that value', async () => {
    const cache = testCache();
    const now = Date.now();
    const entry = createEntry('old', now, now + 60_000, now + 60_000);
    cache.backend.write('k', entry, undefined);
    await expect(getOrCompute(cache, 'k', '1m', () => 'fill')).resolves.toBe('old');
    cache.backend.write('k', { ...entry, value: 'new' }, undefined);
    await expect(getOrCompute(cache, 'k', '1m', () => 'fill')).resolves.toBe('new');
    expect(Object.keys(entry)).toEqual(REQUIRED);
    expect(JSON.parse(JSON.stringify(entry))).toEqual({
      value: 'old',
      createdAt: now,
      freshUntil: now + 60_000,
      staleUntil: now + 60_000,
    });
  });

  it('is not needed for a frozen entry: each hit of it is served', async () => {
    const cache = testCache();
    const now = Date.now();
    cache.backend.write('made', Object.freeze(createEntry('a', now, now + 60_000, now + 60_000)), undefined);
    cache.backend.write(
      'literal',
      Object.freeze({ value: 'b', createdAt: now, freshUntil: now + 60_000, staleUntil: now + 60_000 }),
      undefined,
    );
    for (let i = 0; i < 3; i++) {
      await expect(getOrCompute(cache, 'made', '1m', () => 'fill')).resolves.toBe('a');
      await expect(getOrCompute(cache, 'literal', '1m', () => 'fill')).resolves.toBe('b');
    }
    expect(cache.calls.set).toBe(0);
  });
});
