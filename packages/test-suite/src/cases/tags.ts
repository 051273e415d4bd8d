import { getOrComputeWith, getValue, invalidateTag, invalidateTags, setValue } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry, NEAR_TAGS } from '../entries.js';

// Far more than any adapter's clock tie-break or server-clock estimate can blur.
const GAP = 50;
// How soon after an invalidation a fill starts and must be kept: the next millisecond on a fake
// clock. On a real one 20 ms: a store that dates fills by an estimate of its server's clock, never
// ahead of it (the Redis adapters: within some 10 ms once measured), may count a fill of the next
// few milliseconds as before the invalidation (5 and 10 ms failed there on a loaded machine).
const SOON_FAKE = 1;
const SOON_REAL = 20;

function tagged(value: unknown, createdAt: number, tags: readonly string[]) {
  return { ...entry(value, createdAt, 60_000), tags };
}

/** Tag invalidation: O(1) in the number of tagged entries, checked on read, on every instance. */
export function tagCases(ctx: SuiteContext): void {
  const tags = ctx.options.capabilities.tags === true;
  const soon = ctx.options.clock === 'fake' ? SOON_FAKE : SOON_REAL;

  it.skipIf(!tags)('hands back the tags an entry was written with', async () => {
    const cache = ctx.cache();
    const written = tagged({ n: 1 }, Date.now(), ['user:42', 'odd|tag,{x}%']);
    await cache.set('tagged', written, { ttl: 60_000 });
    expect((await cache.get('tagged'))?.tags).toEqual(['user:42', 'odd|tag,{x}%']);
    // An untagged entry has none.
    await cache.set('untagged', entry('u', Date.now(), 60_000), { ttl: 60_000 });
    expect((await cache.get('untagged'))?.tags ?? []).toEqual([]);
  });

  it.skipIf(!tags)(
    'an invalidated tag turns older entries carrying it into misses, on every instance',
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const now = Date.now();
      await cache.set('a', tagged('a', now, ['t1']), { ttl: 60_000 });
      await cache.set('b', tagged('b', now, ['t1', 't2']), { ttl: 60_000 });
      await cache.set('c', tagged('c', now, ['t2']), { ttl: 60_000 });
      await cache.set('d', entry('d', now, 60_000), { ttl: 60_000 });
      await ctx.wait(GAP);
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await peer.invalidateTags!(['t1']);
      for (const instance of [cache, peer]) {
        // With `replicaLag`, the other instance learns of the invalidation a moment later.
        expect(
          await ctx.acrossReplicas(
            () => instance.get('a'),
            (found) => found === undefined,
          ),
        ).toBeUndefined();
        expect(await instance.get('b')).toBeUndefined();
        expect((await instance.get('c'))?.value).toBe('c');
        expect((await instance.get('d'))?.value).toBe('d');
      }
    },
  );

  // `invalidateTags(tags)` invalidates every one of `tags`, not only its first.
  it.skipIf(!tags)('one call with several tags invalidates each of them, on every instance', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const now = Date.now();
    await cache.set('of-first', tagged('first', now, ['first-of-call']), { ttl: 60_000 });
    await cache.set('of-second', tagged('second', now, ['second-of-call']), { ttl: 60_000 });
    await cache.set('of-neither', tagged('neither', now, ['not-in-call']), { ttl: 60_000 });
    await ctx.wait(GAP);
    // biome-ignore lint/style/noNonNullAssertion: declared by the capability
    await peer.invalidateTags!(['first-of-call', 'second-of-call']);
    for (const instance of [cache, peer]) {
      for (const key of ['of-first', 'of-second']) {
        expect(
          await ctx.acrossReplicas(
            () => instance.get(key),
            (found) => found === undefined,
          ),
          key,
        ).toBeUndefined();
      }
      expect((await instance.get('of-neither'))?.value).toBe('neither');
    }
  });

  // Tags are exact strings, as keys are: two tags that differ only in case, Unicode form or a lone
  // surrogate have records of their own.
  it.skipIf(!tags).each(NEAR_TAGS.map(([a, b]) => [JSON.stringify(a), JSON.stringify(b), a, b]))(
    'keeps tags %s and %s apart (tags are exact strings)',
    async (_a, _b, first, second) => {
      const cache = ctx.cache();
      const now = Date.now();
      await cache.set('of-first', tagged('first', now, [first]), { ttl: 60_000 });
      await cache.set('of-second', tagged('second', now, [second]), { ttl: 60_000 });
      expect((await cache.get('of-first'))?.tags).toEqual([first]);
      expect((await cache.get('of-second'))?.tags).toEqual([second]);
      await ctx.wait(GAP);
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await cache.invalidateTags!([first]);
      expect(await cache.get('of-first')).toBeUndefined();
      expect((await cache.get('of-second'))?.value).toBe('second');
    },
  );

  it.skipIf(!tags)('checks every tag of an entry, not only its first', async () => {
    const cache = ctx.cache();
    await cache.set('many', tagged('many', Date.now(), ['first', 'second', 'third']), { ttl: 60_000 });
    await ctx.wait(GAP);
    // biome-ignore lint/style/noNonNullAssertion: declared by the capability
    await cache.invalidateTags!(['third']);
    expect(await cache.get('many')).toBeUndefined();
  });

  // Only across instances: an in-process cache may count a fill the core marks
  // `afterInvalidations` as after its own process's invalidations of that millisecond (the memory
  // cache does). Another instance's fill of that millisecond may have started first.
  it.skipIf(!tags || ctx.options.clock !== 'fake' || ctx.options.replica === undefined)(
    "an entry created in the very millisecond of another instance's invalidation counts as before it (a fake clock pins the tie)",
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await peer.invalidateTags!(['tie']);
      await cache.set('tie', tagged('same ms', Date.now(), ['tie']), { ttl: 60_000 });
      expect(
        await ctx.acrossReplicas(
          () => cache.get('tie'),
          (found) => found === undefined,
        ),
      ).toBeUndefined();
    },
  );

  it.skipIf(!tags || ctx.options.clock !== 'fake')(
    'a direct write (setValue) in the very millisecond of an invalidation counts as after it',
    async () => {
      const cache = ctx.cache();
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await cache.invalidateTags!(['reset']);
      // `invalidateTag`, then `setValue` to repopulate: the value written must be read.
      await cache.set('reset', tagged('after', Date.now(), ['reset']), { ttl: 60_000, direct: true });
      expect((await cache.get('reset'))?.value).toBe('after');
    },
  );

  it.skipIf(!tags)(
    'invalidate, direct write, invalidate, back to back (one millisecond on a fake clock): the last invalidation wins',
    async () => {
      const cache = ctx.cache();
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      const invalidate = () => cache.invalidateTags!(['again']);
      for (let round = 0; round < 3; round++) {
        await invalidate();
        await cache.set('again', tagged(`v${round}`, Date.now(), ['again']), { ttl: 60_000, direct: true });
        // The write came after the invalidation: read (on a real clock it may land in a later ms).
        if (ctx.options.clock === 'fake') expect((await cache.get('again'))?.value).toBe(`v${round}`);
        await invalidate();
        // The invalidation came after the write, even in the millisecond the write was dated past.
        expect(await cache.get('again')).toBeUndefined();
      }
      // The same through another of the entry's tags: invalidate one, write, invalidate the other.
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await cache.invalidateTags!(['first-of-two']);
      const both = ['first-of-two', 'second-of-two'];
      await cache.set('both', tagged('v', Date.now(), both), { ttl: 60_000, direct: true });
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await cache.invalidateTags!(['second-of-two']);
      expect(await cache.get('both')).toBeUndefined();
    },
  );

  it.skipIf(!tags)('keeps entries created after the invalidation', async () => {
    const cache = ctx.cache();
    await cache.set('k', tagged('old', Date.now(), ['t']), { ttl: 60_000 });
    await ctx.wait(GAP);
    // biome-ignore lint/style/noNonNullAssertion: declared by the capability
    await cache.invalidateTags!(['t']);
    await ctx.wait(GAP);
    await cache.set('k', tagged('new', Date.now(), ['t']), { ttl: 60_000 });
    expect((await cache.get('k'))?.value).toBe('new');
  });

  // An invalidation covers entries created at or before the moment it is made, not after: a fill
  // that started just after it is kept.
  it.skipIf(!tags)(
    `keeps a fill that started just after an invalidation (${
      ctx.options.clock === 'fake' ? 'the next millisecond' : `${SOON_REAL} ms later on a real clock`
    })`,
    async () => {
      const cache = ctx.cache();
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await cache.invalidateTags!(['just-before']);
      await ctx.wait(soon);
      // A plain fill's write (not `direct`, not `afterInvalidations`), dated when it started.
      await cache.set('just-after', tagged('filled after', Date.now(), ['just-before']), { ttl: 60_000 });
      expect((await cache.get('just-after'))?.value).toBe('filled after');
    },
  );

  it.skipIf(!tags)(
    'a fill that started before the invalidation and writes after it is never read',
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const fillStarted = Date.now();
      await ctx.wait(GAP);
      // biome-ignore lint/style/noNonNullAssertion: declared by the capability
      await peer.invalidateTags!(['late']);
      await ctx.wait(GAP);
      await cache.set('late-fill', tagged('stale data', fillStarted, ['late']), { ttl: 60_000 });
      expect(await cache.get('late-fill')).toBeUndefined();
      expect(await peer.get('late-fill')).toBeUndefined();
    },
  );

  it.skipIf(!tags)(
    'invalidateTag through the core: getOrComputeWith fills again, setValue tags are honoured',
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      let fills = 0;
      const fill = () => `v${++fills}`;
      expect(await getOrComputeWith(cache, 'page', { ttl: '1m', tags: ['product:7'] }, fill)).toBe('v1');
      await setValue(cache, 'other', 'o', { ttl: '1m', tags: ['product:7'] });
      await ctx.wait(GAP);
      await invalidateTag(peer, 'product:7');
      await ctx.wait(GAP);
      expect(
        await ctx.acrossReplicas(
          () => getValue(cache, 'other'),
          (found) => found === undefined,
        ),
      ).toBeUndefined();
      expect(await getOrComputeWith(peer, 'page', { ttl: '1m', tags: ['product:7'] }, fill)).toBe('v2');
      await invalidateTags(cache, []);
    },
  );

  it.skipIf(!tags)('one call invalidates every entry carrying the tag', async () => {
    const cache = ctx.cache();
    let misses = 0;
    const now = Date.now();
    const keys = Array.from({ length: 50 }, (_, i) => `many-${i}`);
    await Promise.all(keys.map((key) => cache.set(key, tagged(key, now, ['bulk']), { ttl: 60_000 })));
    await ctx.wait(GAP);
    // biome-ignore lint/style/noNonNullAssertion: declared by the capability
    await cache.invalidateTags!(['bulk']);
    for (const key of keys) {
      if ((await cache.get(key)) === undefined) misses++;
    }
    expect(misses).toBe(keys.length);
  });
}
