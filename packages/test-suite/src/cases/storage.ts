import type { Cache } from '@stampede/core';
import { CHANGES } from '@stampede/core/adapter';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry, expectReplicated, expectRoundTrip, NEAR_KEYS, ODD_KEYS, VALUES } from '../entries.js';

// A long key is named by its length and its end, where the two keys of a pair differ.
const keyLabel = (key: string): string =>
  key.length <= 24
    ? JSON.stringify(key)
    : `a ${key.length}-character key ending ${JSON.stringify(key.slice(-1))}`;

const isThenable = (value: unknown): boolean =>
  typeof (value as { then?: unknown } | null | undefined)?.then === 'function';

/** A cache that may keep a change count (the `changes` capability). */
type Counted = Cache & { readonly [CHANGES]?: number };

/** The required part of the contract: read, write with a physical TTL, delete. */
export function storageCases(ctx: SuiteContext): void {
  const { capabilities } = ctx.options;

  it('has exactly the optional methods its capabilities declare', async () => {
    const cache = ctx.cache();
    expect(typeof cache.get).toBe('function');
    expect(typeof cache.set).toBe('function');
    expect(typeof cache.delete).toBe('function');
    // The core decides by the presence of a method, so a declaration and the object must agree.
    expect(typeof cache.tryAcquireFillLock === 'function', 'lock').toBe(capabilities.lock);
    expect(typeof cache.onFillDone === 'function', 'push').toBe(capabilities.push);
    expect(typeof cache.roundTrip === 'function', 'roundTrip').toBe(capabilities.roundTrip);
    expect(typeof cache.invalidateTags === 'function', 'tags').toBe(capabilities.tags === true);
    expect(cache.bus !== undefined, 'bus').toBe(capabilities.bus ?? false);
    expect(typeof cache.tryAcquireFillLockAndRead === 'function', 'lockAndRead').toBe(
      capabilities.lockAndRead ?? false,
    );
    expect(typeof (cache as Counted)[CHANGES] === 'number', 'changes').toBe(capabilities.changes ?? false);
    // Only alongside `onFillDone`: it says whether a listener added now would hear.
    if (typeof cache.hearsFillDone === 'function')
      expect(capabilities.push, 'hearsFillDone needs push').toBe(true);
    if (capabilities.lock) {
      const lock = await cache.tryAcquireFillLock?.('capabilities', 5_000);
      expect(lock).toBeDefined();
      expect(typeof lock?.extend === 'function', 'extend').toBe(capabilities.extend);
      expect(typeof lock?.commit === 'function', 'commit').toBe(capabilities.commit ?? false);
      await lock?.release('failed');
    } else {
      expect(capabilities.extend, 'extend needs lock').toBe(false);
      expect(capabilities.push, 'push needs lock').toBe(false);
      expect(capabilities.lockAndRead ?? false, 'lockAndRead needs lock').toBe(false);
      expect(capabilities.commit ?? false, 'commit needs lock').toBe(false);
    }
  });

  it.skipIf(!capabilities.sync)('answers get, set and delete synchronously', () => {
    const cache = ctx.cache();
    const written = entry('sync', Date.now(), 60_000);
    expect(isThenable(cache.set('sync', written, { ttl: 60_000 }))).toBe(false);
    const read = cache.get('sync');
    expect(isThenable(read)).toBe(false);
    expect(read).toEqual(written);
    expect(isThenable(cache.delete('sync'))).toBe(false);
    expect(cache.get('sync')).toBeUndefined();
  });

  it('reads a missing key as undefined', async () => {
    expect(await ctx.cache().get('missing')).toBeUndefined();
  });

  it.each(VALUES)('round-trips %s with its times', async (_label, value) => {
    const cache = ctx.cache();
    const written = entry(value, Date.now(), 60_000, 30_000);
    // Compared with a copy taken before the write: an adapter that changes the entry it was given
    // (its times, its delta) would otherwise read back "equal" to the changed object.
    const expected = structuredClone(written);
    await cache.set('value', written, { ttl: 90_000 });
    expectRoundTrip(await cache.get('value'), expected, capabilities.serverClock);
  });

  it('keeps an entry past its staleUntil for as long as its physical TTL (fail-safe falls back on it)', async () => {
    const cache = ctx.cache();
    // Fresh for 100 ms, no grace, but kept an hour: what fail-safe's maxStale asks for.
    const written = entry('kept', Date.now(), 100);
    const expected = structuredClone(written);
    await cache.set('kept-past-stale', written, { ttl: 3_600_000 });
    await ctx.wait(400);
    expectRoundTrip(await cache.get('kept-past-stale'), expected, capabilities.serverClock);
  });

  it.skipIf(!capabilities.roundTrip)('roundTrip(value) is what a later get returns', async () => {
    const cache = ctx.cache();
    const value = { at: new Date(1_700_000_000_000), list: [1, 'two'], nothing: null, n: 1.5 };
    const expected = cache.roundTrip?.(value);
    await cache.set('round-trip', entry(value, Date.now(), 60_000), { ttl: 60_000 });
    expect((await cache.get('round-trip'))?.value).toEqual(expected);
  });

  it.skipIf(capabilities.delta === false)(
    "keeps an entry's delta (its fill's duration), and none where there was none",
    async () => {
      const cache = ctx.cache();
      const timed = { ...entry('timed', Date.now(), 60_000), delta: 137 };
      const expected = structuredClone(timed);
      await cache.set('delta', timed, { ttl: 60_000 });
      expectRoundTrip(await cache.get('delta'), expected, capabilities.serverClock);
      const untimed = entry('untimed', Date.now(), 60_000);
      await cache.set('no-delta', untimed, { ttl: 60_000 });
      expect((await cache.get('no-delta'))?.delta).toBeUndefined();
    },
  );

  it('round-trips an entry that never expires', async () => {
    const cache = ctx.cache();
    const written = entry({ forever: true }, Date.now(), undefined);
    await cache.set('forever', written, { ttl: undefined });
    const read = await cache.get('forever');
    expect(read?.freshUntil).toBe(Number.POSITIVE_INFINITY);
    expect(read?.staleUntil).toBe(Number.POSITIVE_INFINITY);
    await ctx.wait(300);
    expectRoundTrip(await cache.get('forever'), written, capabilities.serverClock);
  });

  // The physical `ttl` is counted from the write: an entry whose fill started two minutes ago
  // (a slow fill, a re-armed old value) is kept `ttl` from now, not `ttl` from its createdAt.
  it("counts the physical TTL from the write, not from the entry's createdAt", async () => {
    const cache = ctx.cache();
    const now = Date.now();
    // Created two minutes ago, stale until a minute from now, kept a minute.
    const written = entry('filled long ago', now - 120_000, 150_000, 30_000);
    const expected = structuredClone(written);
    await cache.set('old-fill', written, { ttl: 60_000 });
    expectRoundTrip(await cache.get('old-fill'), expected, capabilities.serverClock);
  });

  // The physical `ttl` is the adapter's to honour in full, and no `ttl` means until deleted or
  // evicted: no cap of the adapter's own. Minutes and a day pass only on a fake clock.
  it.skipIf(ctx.options.clock !== 'fake')(
    'keeps an entry for its whole physical TTL: an hour-long one after 11 minutes, one without TTL after a day (fake clock only: a real clock cannot wait that long)',
    async () => {
      const cache = ctx.cache();
      const now = Date.now();
      const hour = entry('an hour', now, 3_600_000);
      const forever = entry('forever', now, undefined);
      await cache.set('hour', hour, { ttl: 3_600_000 });
      await cache.set('no-ttl', forever, { ttl: undefined });
      await ctx.wait(11 * 60_000);
      expectRoundTrip(await cache.get('hour'), hour, capabilities.serverClock);
      await ctx.wait(24 * 3_600_000 - 11 * 60_000);
      expectRoundTrip(await cache.get('no-ttl'), forever, capabilities.serverClock);
    },
  );

  it('drops an entry after its physical TTL', async () => {
    const cache = ctx.cache();
    // Long enough that a loaded machine still reads it back before it lapses.
    await cache.set('short', entry('v', Date.now(), 1_000), { ttl: 1_000 });
    expect((await cache.get('short'))?.value).toBe('v');
    await ctx.wait(1_300);
    expect(await cache.get('short')).toBeUndefined();
  });

  it('deletes, and deleting a missing key is fine', async () => {
    const cache = ctx.cache();
    await cache.set('gone', entry(1, Date.now(), 60_000), { ttl: 60_000 });
    await cache.delete('gone');
    expect(await cache.get('gone')).toBeUndefined();
    await expect(Promise.resolve(cache.delete('never-there'))).resolves.toBeUndefined();
  });

  it.each(ODD_KEYS.map((key) => [JSON.stringify(key).slice(0, 40), key]))(
    'keeps odd key %s apart from its neighbours',
    async (_label, key) => {
      const cache = ctx.cache();
      await cache.set(key, entry(`value of ${key}`, Date.now(), 60_000), { ttl: 60_000 });
      expect((await cache.get(key))?.value).toBe(`value of ${key}`);
      for (const other of ODD_KEYS) {
        if (other !== key) expect(await cache.get(other)).toBeUndefined();
      }
      await cache.delete(key);
      expect(await cache.get(key)).toBeUndefined();
    },
  );

  it.each(NEAR_KEYS.map(([a, b]) => [keyLabel(a), keyLabel(b), a, b]))(
    'keeps %s and %s apart (keys are exact strings)',
    async (_a, _b, first, second) => {
      const cache = ctx.cache();
      // With a lock held on the first key: its lock must not be the second key's entry, nor block it.
      const lock = capabilities.lock ? await cache.tryAcquireFillLock?.(first, 5_000) : undefined;
      await cache.set(first, entry('first', Date.now(), 60_000), { ttl: 60_000 });
      await cache.set(second, entry('second', Date.now(), 60_000), { ttl: 60_000 });
      expect((await cache.get(first))?.value).toBe('first');
      expect((await cache.get(second))?.value).toBe('second');
      if (capabilities.lock) {
        const other = await cache.tryAcquireFillLock?.(second, 5_000);
        expect(other, 'the second key has a lock of its own').toBeDefined();
        await other?.release('failed');
      }
      await cache.delete(first);
      expect(await cache.get(first)).toBeUndefined();
      expect((await cache.get(second))?.value).toBe('second');
      await lock?.release('failed');
    },
  );

  it('isolates two instances from create() (they never see each other)', async () => {
    const cache = ctx.cache();
    const other = await ctx.options.create();
    await cache.set('shared-name', entry('mine', Date.now(), 60_000), { ttl: 60_000 });
    expect(await other.get('shared-name')).toBeUndefined();
    await other.set('shared-name', entry('theirs', Date.now(), 60_000), { ttl: 60_000 });
    expect((await cache.get('shared-name'))?.value).toBe('mine');
    await other.delete('shared-name');
    expect((await cache.get('shared-name'))?.value).toBe('mine');
  });

  it.skipIf(ctx.options.replica === undefined)('shares entries with a replica', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const written = entry('shared', Date.now(), 60_000);
    await cache.set('replicated', written, { ttl: 60_000 });
    expectReplicated(await peer.get('replicated'), written);
    await peer.delete('replicated');
    const read = await ctx.acrossReplicas(
      () => cache.get('replicated'),
      (found) => found === undefined,
    );
    expect(read).toBeUndefined();
  });

  it.skipIf(!(capabilities.changes ?? false))(
    'raises its change count on every read, write, delete, clear and tag invalidation',
    async () => {
      const cache = ctx.cache() as Counted & { clear?: () => unknown };
      const count = (): number => cache[CHANGES] as number;
      const changes: [string, () => unknown][] = [
        ['set', () => cache.set('changes', entry('v', Date.now(), 60_000), { ttl: 60_000 })],
        // A read moves its entry up an lru's order: what a later eviction drops.
        ['get', () => cache.get('changes')],
        ['set again', () => cache.set('changes', entry('w', Date.now() + 1, 60_000), { ttl: 60_000 })],
        ['delete', () => cache.delete('changes')],
      ];
      if (typeof cache.clear === 'function') changes.push(['clear', () => cache.clear?.()]);
      if (capabilities.tags === true) changes.push(['invalidateTags', () => cache.invalidateTags?.(['t'])]);
      for (const [name, change] of changes) {
        const before = count();
        await change();
        expect(count(), name).toBeGreaterThan(before);
      }
    },
  );
}
