import type { Cache, FillLock } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';

// A lock TTL short enough to wait out for real, and how long to wait for it to lapse: a
// millisecond past it on a fake clock; on a real one half as long again (the lock's expiry runs
// from the grant, which came before its reply), so a lock that lapses at twice its TTL fails.
const SHORT = 100;
const PAST_SHORT_FAKE = SHORT + 1;
const PAST_SHORT_REAL = 150;
// A first TTL long enough that the `extend` call itself lands before it (a remote round trip on a
// loaded machine), and a wait that outlasts it.
const BRIEF = 300;
const PAST_BRIEF = 650;

function acquire(cache: Cache, key: string, ttl: number): Promise<FillLock | undefined> {
  const tryAcquire = cache.tryAcquireFillLock;
  // Declared `lock: true` but missing: fail loudly rather than read as "lock refused".
  if (tryAcquire === undefined)
    throw new Error('the cache declares lock: true but has no tryAcquireFillLock');
  return Promise.resolve(tryAcquire.call(cache, key, ttl));
}

/** The distributed fill lock: one holder, owner-only release, extension. */
export function lockCases(ctx: SuiteContext): void {
  const { lock, extend } = ctx.options.capabilities;
  const pastShort = ctx.options.clock === 'fake' ? PAST_SHORT_FAKE : PAST_SHORT_REAL;

  // One holder at a time, and a release frees the lock whatever the outcome: after a failed fill
  // as after a filled one, the next caller may fill at once.
  it.skipIf(!lock)("grants one holder at a time and frees on release ('filled' or 'failed')", async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const first = await acquire(cache, 'locked', 5_000);
    expect(first).toBeDefined();
    expect(await acquire(cache, 'locked', 5_000)).toBeUndefined();
    expect(await acquire(peer, 'locked', 5_000)).toBeUndefined();
    const other = await acquire(peer, 'other-key', 5_000);
    expect(other).toBeDefined();
    await first?.release('filled');
    const again = await acquire(peer, 'locked', 5_000);
    expect(again).toBeDefined();
    await again?.release('failed');
    const afterFailed = await acquire(cache, 'locked', 5_000);
    expect(afterFailed, "release('failed') frees the lock").toBeDefined();
    await afterFailed?.release('failed');
    await other?.release('filled');
  });

  // A lock lapses after its TTL, no later (a fake clock checks the next millisecond).
  it.skipIf(!lock)('lapses after its TTL', async () => {
    const cache = ctx.cache();
    expect(await acquire(cache, 'lapsing', SHORT)).toBeDefined();
    await ctx.wait(pastShort);
    const next = await acquire(cache, 'lapsing', SHORT);
    expect(next).toBeDefined();
    await next?.release('failed');
  });

  it.skipIf(!lock)("does not let a lapsed holder's release free the next holder's lock", async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const old = await acquire(cache, 'stolen', SHORT);
    expect(old).toBeDefined();
    await ctx.wait(pastShort);
    const current = await acquire(peer, 'stolen', 5_000);
    expect(current).toBeDefined();
    // The old handle's token no longer owns the lock: its release must be a no-op.
    await old?.release('filled');
    expect(await acquire(cache, 'stolen', 5_000)).toBeUndefined();
    expect(await acquire(peer, 'stolen', 5_000)).toBeUndefined();
    await current?.release('filled');
    const free = await acquire(cache, 'stolen', 5_000);
    expect(free).toBeDefined();
    await free?.release('failed');
  });

  it.skipIf(!lock || !extend)('extend keeps the lock past its first TTL', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const held = await acquire(cache, 'extended', BRIEF);
    expect(await held?.extend?.(5_000)).toBe(true);
    await ctx.wait(PAST_BRIEF);
    expect(await acquire(peer, 'extended', 5_000)).toBeUndefined();
    await held?.release('filled');
    // Released: the handle holds nothing any more.
    expect(await held?.extend?.(5_000)).toBe(false);
    const next = await acquire(peer, 'extended', 5_000);
    expect(next).toBeDefined();
    await next?.release('failed');
  });

  it.skipIf(!lock || !extend)('extend returns false for a lock no longer held', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const old = await acquire(cache, 'lapsed', SHORT);
    await ctx.wait(pastShort);
    // Lapsed and free: nobody holds it, and extending must not take it back.
    expect(await old?.extend?.(5_000)).toBe(false);
    const current = await acquire(peer, 'lapsed', SHORT);
    expect(current).toBeDefined();
    // Held by someone else: still false, and the other holder's lock is left to lapse on its own.
    expect(await old?.extend?.(60_000)).toBe(false);
    await ctx.wait(pastShort);
    const after = await acquire(cache, 'lapsed', 5_000);
    expect(after).toBeDefined();
    await after?.release('failed');
  });
}
