import { getOrCompute, getValue, invalidate, setValue, whenIdle } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry, expectReplicated, expectRoundTrip } from '../entries.js';

// A gap between a delete and the writes around it that no adapter's clock tie-break can blur
// (Redis adapters convert between this process's clock and the server's).
const GAP = 50;
// How long ago a delete may be and still refuse a fill that started before it: seconds on a fake
// clock (within the 10 s the Redis adapters keep a tombstone by default, their `tombstoneTtl`); on a
// real one just past a second, the longest a case may wait.
const LONG_AGO_FAKE = 5_000;
const LONG_AGO_REAL = 1_100;

/** Which write wins: never an older one, and never one whose fill started before a delete. */
export function orderingCases(ctx: SuiteContext): void {
  const { serverClock } = ctx.options.capabilities;
  const longAgo = ctx.options.clock === 'fake' ? LONG_AGO_FAKE : LONG_AGO_REAL;

  it('never replaces a newer entry with an older one, and answers false for the write it refused', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    // A tiered cache keeps in its L1 what `set` did not refuse: a refusal must answer `false`.
    expect(await cache.set('order', entry('newer', now, 60_000), { ttl: 60_000 })).not.toBe(false);
    expect(await cache.set('order', entry('older', now - 1_000, 60_000), { ttl: 60_000 })).toBe(false);
    expect((await cache.get('order'))?.value).toBe('newer');
    expect(await cache.set('order', entry('newest', now + 1, 60_000), { ttl: 60_000 })).not.toBe(false);
    expect((await cache.get('order'))?.value).toBe('newest');
  });

  // Order is by createdAt (when the fill started) alone: a store that keeps whichever entry lives
  // longest would keep an old value over a newer fill that chose a shorter TTL.
  it('lets a newer write replace an older entry that lives longer (a shorter freshUntil and staleUntil)', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    await cache.set('shorter', entry('older, long-lived', now - 1_000, 3_600_000, 3_600_000), {
      ttl: 7_200_000,
    });
    const newer = entry('newer, short-lived', now, 30_000, 1_000);
    expect(await cache.set('shorter', newer, { ttl: 31_000 })).not.toBe(false);
    expectRoundTrip(await cache.get('shorter'), newer, ctx.options.capabilities.serverClock);
  });

  it('refuses an older write that would live longer, and answers false', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    const newer = entry('newer, short-lived', now, 30_000, 1_000);
    await cache.set('longer', newer, { ttl: 31_000 });
    for (const [label, older] of [
      ['an hour', entry('older, long-lived', now - 1_000, 3_600_000, 3_600_000)],
      ['forever', entry('older, never expires', now - 1_000, undefined)],
    ] as const) {
      expect(await cache.set('longer', older, { ttl: undefined }), label).toBe(false);
      expectRoundTrip(await cache.get('longer'), newer, ctx.options.capabilities.serverClock);
    }
  });

  // The never-older rule holds for as long as the newer entry is stored, not only while it is fresh:
  // a stale entry (in its grace, or past its staleUntil and kept by its physical TTL for fail-safe)
  // still outranks a fill that started before it.
  it('refuses an older write over a newer entry that is no longer fresh (in its grace, or kept past staleUntil)', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    // Fresh briefly, then in a grace of an hour, or past staleUntil but kept an hour. Long enough on
    // a real clock that a loaded machine's write lands before its staleUntil.
    const fresh = ctx.options.clock === 'fake' ? 100 : 300;
    const inGrace = entry('newer, in its grace', now, fresh, 3_600_000);
    const pastStale = entry('newer, past its staleUntil', now, fresh);
    await cache.set('stale-newer', inGrace, { ttl: 3_600_000 + fresh });
    await cache.set('kept-newer', pastStale, { ttl: 3_600_000 });
    await ctx.wait(fresh + 100);
    for (const [key, newer] of [
      ['stale-newer', inGrace],
      ['kept-newer', pastStale],
    ] as const) {
      expect(await cache.set(key, entry('older', now - 1_000, 60_000), { ttl: 60_000 }), key).toBe(false);
      expectRoundTrip(await cache.get(key), newer, serverClock);
    }
  });

  it('gives a tie on createdAt to the write (a re-arm, or a setValue in the same millisecond)', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    await cache.set('tie', entry('first', now, 60_000), { ttl: 60_000 });
    // A setValue (`direct`). A fill's write is not asked to win a tie: a remote adapter may move a
    // fill's times by a bound of the server's clock that only ever errs older, and that bound moves
    // between two writes (the Redis adapters widen it for clock drift as time passes).
    expect(await cache.set('tie', entry('second', now, 60_000), { ttl: 60_000, direct: true })).not.toBe(
      false,
    );
    expect((await cache.get('tie'))?.value).toBe('second');
  });

  // On one clock a fill's write is dated by the clock that dated the entry it ties with, so the tie
  // goes to the write as for any other; a cache on its backend's clock (`serverClock`) is not asked.
  it.skipIf(ctx.options.capabilities.serverClock === true)(
    "gives a fill's write the tie on createdAt, on a cache with one clock",
    async () => {
      const cache = ctx.cache();
      const now = Date.now();
      await cache.set('tie-fill', entry('first', now, 60_000), { ttl: 60_000 });
      expect(await cache.set('tie-fill', entry('second', now, 60_000), { ttl: 60_000 })).not.toBe(false);
      expect((await cache.get('tie-fill'))?.value).toBe('second');
    },
  );

  it('gives a re-arm the tie with the entry it renews, as this cache returned it', async () => {
    const cache = ctx.cache();
    await cache.set('tie-rearm', entry('kept', Date.now() - 1_000, 500, 60_000), { ttl: 60_000 });
    const read = await cache.get('tie-rearm');
    expect(read?.value).toBe('kept');
    if (read === undefined) return;
    const now = Date.now();
    const rearmed = { ...read, freshUntil: now + 30_000, staleUntil: now + 60_000 };
    expect(await cache.set('tie-rearm', rearmed, { ttl: 60_000, renews: read })).not.toBe(false);
    const after = await cache.get('tie-rearm');
    expect(after?.value).toBe('kept');
    expect(after?.freshUntil ?? 0).toBeGreaterThan(now);
  });

  // A re-arm (`renews`) writes back the entry it read, with that entry's createdAt: the never-older
  // rule applies to it as to any write, so a newer fill that landed since the read stays.
  it('refuses a re-arm (renews) once a newer fill replaced the entry it read, and answers false', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    await cache.set('rearm-late', entry('read', now - 1_000, 500, 60_000), { ttl: 60_000 });
    const read = await cache.get('rearm-late');
    expect(read?.value).toBe('read');
    if (read === undefined) return;
    const newer = entry('newer fill', now, 60_000);
    expect(await cache.set('rearm-late', newer, { ttl: 60_000 })).not.toBe(false);
    const rearmed = { ...read, freshUntil: now + 30_000, staleUntil: now + 60_000 };
    expect(await cache.set('rearm-late', rearmed, { ttl: 60_000, renews: read })).toBe(false);
    expectRoundTrip(await cache.get('rearm-late'), newer, serverClock);
  });

  it('stores a setValue made right after an invalidate (the same millisecond on a fake clock)', async () => {
    const cache = ctx.cache();
    await setValue(cache, 'reset', 'old', { ttl: 60_000 });
    await invalidate(cache, 'reset');
    await setValue(cache, 'reset', 'new', { ttl: 60_000 });
    expect(await getValue(cache, 'reset')).toBe('new');
  });

  it('turns a key into a miss with a newer write of ttl 0, or less', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    for (const [key, ttl] of [
      ['expire-now', 0],
      ['expire-past', -1],
    ] as const) {
      await cache.set(key, entry('old', now - 1_000, 60_000), { ttl: 60_000 });
      await cache.set(key, entry('gone', now, 60_000), { ttl });
      expect(await cache.get(key)).toBeUndefined();
    }
  });

  it('turns a key into a miss with a newer write whose staleUntil has passed', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    await cache.set('stale-write', entry('old', now - 2_000, 60_000), { ttl: 60_000 });
    // Created a second ago, fresh for 500 ms, no grace: already past its staleUntil.
    await cache.set('stale-write', entry('late', now - 1_000, 500), { ttl: 60_000 });
    expect(await cache.get('stale-write')).toBeUndefined();
  });

  it('keeps a newer entry when an older write arrives already expired', async () => {
    const cache = ctx.cache();
    const now = Date.now();
    const newer = entry('newer', now, 60_000);
    await cache.set('keep-newer', newer, { ttl: 60_000 });
    await cache.set('keep-newer', entry('older', now - 1_000, 60_000), { ttl: 0 });
    expectRoundTrip(await cache.get('keep-newer'), newer, ctx.options.capabilities.serverClock);
  });

  it('refuses a write whose fill started before a delete, and accepts one after it', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const fillStarted = Date.now();
    await cache.set('deleted', entry('before', fillStarted - 1_000, 60_000), { ttl: 60_000 });
    await ctx.wait(GAP);
    // The delete lands while the fill that started at `fillStarted` is still running...
    await peer.delete('deleted');
    await ctx.wait(GAP);
    // ...so its write, arriving afterwards, must not bring the key back (on either instance), and
    // answers `false`.
    expect(await cache.set('deleted', entry('resurrected', fillStarted, 60_000), { ttl: 60_000 })).toBe(
      false,
    );
    expect(await cache.get('deleted')).toBeUndefined();
    expect(await peer.get('deleted')).toBeUndefined();
    // A delete is not a ban: a fill that started after it writes.
    const later = entry('after', Date.now(), 60_000);
    await cache.set('deleted', later, { ttl: 60_000 });
    expectReplicated(await peer.get('deleted'), later);
  });

  // A delete is remembered for as long as a fill may run, not only for a moment (a store that
  // forgets its deletions after a second brings the key back under a slower fill).
  it(`refuses a write whose fill started before a delete made long before it (${
    ctx.options.clock === 'fake' ? '5 seconds' : 'over a second on a real clock'
  })`, async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const fillStarted = Date.now();
    await cache.set('long-deleted', entry('before', fillStarted - 1_000, 60_000), { ttl: 60_000 });
    await ctx.wait(GAP);
    await peer.delete('long-deleted');
    await ctx.wait(longAgo);
    // Fresh for an hour: refused for the delete, not because it expired while the fill ran.
    const late = entry('resurrected', fillStarted, 3_600_000);
    expect(await cache.set('long-deleted', late, { ttl: 3_600_000 })).toBe(false);
    expect(await cache.get('long-deleted')).toBeUndefined();
    expect(await peer.get('long-deleted')).toBeUndefined();
  });

  // The delete rule refuses fills only: a direct write (`setValue`) comes after every delete its
  // caller knows of, whatever the createdAt it carries, so it is stored.
  it('stores a direct write (setValue) whose createdAt is before a delete (a delete refuses fills only)', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const dated = Date.now();
    await cache.set('direct-after-delete', entry('old', dated - 1_000, 60_000), { ttl: 60_000 });
    // Well before the delete, not in its millisecond, where a tie-break could let it through.
    await ctx.wait(GAP);
    await peer.delete('direct-after-delete');
    const direct = entry('direct', dated, 60_000);
    expect(await cache.set('direct-after-delete', direct, { ttl: 60_000, direct: true })).not.toBe(false);
    expect((await cache.get('direct-after-delete'))?.value).toBe('direct');
  });

  it('keeps an invalidation made during a fill (getOrCompute, invalidate)', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    let started!: () => void;
    const fillStarted = new Promise<void>((resolve) => {
      started = resolve;
    });
    let finish!: (value: string) => void;
    const filling = getOrCompute(cache, 'invalidated', 60_000, () => {
      started();
      return new Promise<string>((resolve) => {
        finish = resolve;
      });
    });
    await fillStarted;
    await ctx.wait(GAP);
    // On a replica when there is one: only the adapter can stop that fill's write.
    await invalidate(peer, 'invalidated');
    await ctx.wait(GAP);
    finish('computed before the invalidation');
    // Its callers still get the value; it is just not cached.
    expect(await filling).toBe('computed before the invalidation');
    expect(await getValue(cache, 'invalidated')).toBeUndefined();
    expect(await getValue(peer, 'invalidated')).toBeUndefined();
  });

  it('agrees with setValue, getValue and invalidate', async () => {
    const cache = ctx.cache();
    await setValue(cache, 'plain', { n: 1 }, { ttl: 60_000 });
    expect(await getValue(cache, 'plain')).toEqual({ n: 1 });
    expect(await getOrCompute(cache, 'plain', 60_000, () => ({ n: 2 }))).toEqual({ n: 1 });
    await invalidate(cache, 'plain');
    expect(await getValue(cache, 'plain')).toBeUndefined();
    expect(await getOrCompute(cache, 'plain', 60_000, () => ({ n: 3 }))).toEqual({ n: 3 });
  });

  it('serves getOrCompute: one fill for a herd, then hits', async () => {
    const cache = ctx.cache();
    let fills = 0;
    const fill = async () => {
      fills++;
      return { count: 42 };
    };
    const herd = await Promise.all(
      Array.from({ length: 50 }, () => getOrCompute(cache, 'herd', 60_000, fill)),
    );
    expect(fills).toBe(1);
    for (const value of herd) expect(value).toEqual({ count: 42 });
    expect(await getOrCompute(cache, 'herd', 60_000, fill)).toEqual({ count: 42 });
    expect(fills).toBe(1);
  });

  it("has stored a fill's value once whenIdle(cache) resolves (shutdown waits for it)", async () => {
    const cache = ctx.cache();
    // The callers have the value before the write lands; `whenIdle` (and the Redis caches'
    // `close()`) must see the adapter's `set` through to its end.
    expect(await getOrCompute(cache, 'idle', 60_000, () => 'filled')).toBe('filled');
    expect(await whenIdle(cache, { timeout: 10_000 })).toBe(true);
    expect((await cache.get('idle'))?.value).toBe('filled');
  });
}
