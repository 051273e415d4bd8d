import type { Cache, FillLock, FillLockAttempt, FillOutcome } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry, expectReplicated } from '../entries.js';

// A lock TTL short enough to wait out for real, and a wait that outlasts it on a loaded machine.
const SHORT = 100;
const PAST_SHORT = 350;

async function acquire(cache: Cache, key: string, ttl: number): Promise<FillLock | undefined> {
  const tryAcquire = cache.tryAcquireFillLock;
  if (tryAcquire === undefined)
    throw new Error('the cache declares lock: true but has no tryAcquireFillLock');
  return (await tryAcquire.call(cache, key, ttl)) ?? undefined;
}

async function attempt(cache: Cache, key: string, ttl: number): Promise<FillLockAttempt> {
  const tryAcquire = cache.tryAcquireFillLockAndRead;
  if (tryAcquire === undefined) {
    throw new Error('the cache declares lockAndRead: true but has no tryAcquireFillLockAndRead');
  }
  return tryAcquire.call(cache, key, ttl);
}

/** The lock and its commit, held on `cache`. */
async function committable(cache: Cache, key: string, ttl: number): Promise<Required<FillLock>> {
  const lock = await acquire(cache, key, ttl);
  if (lock === undefined) throw new Error(`the lock of '${key}' is taken`);
  if (lock.commit === undefined)
    throw new Error('the cache declares commit: true but its lock has no commit');
  return lock as Required<FillLock>;
}

/**
 * The optional members that cut a locked miss's round trips: `tryAcquireFillLockAndRead` (the lock
 * attempt reads the key too) and `FillLock.commit` (write, release and announcement in one step).
 */
export function combinedCases(ctx: SuiteContext): void {
  const { lock, push, lockAndRead = false, commit = false } = ctx.options.capabilities;

  it.skipIf(!lock || !lockAndRead)(
    'tryAcquireFillLockAndRead gives the lock tryAcquireFillLock would, with the entry get would',
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const first = await attempt(cache, 'read-lock', 5_000);
      expect(first.lock).toBeDefined();
      expect(first.entry).toBeUndefined();
      const written = entry('there', Date.now(), 60_000);
      await peer.set('read-lock', written, { ttl: 60_000 });
      // Held: no lock, but the entry is there.
      const lost = await attempt(peer, 'read-lock', 5_000);
      expect(lost.lock).toBeUndefined();
      expectReplicated(lost.entry, written);
      expect(await acquire(peer, 'read-lock', 5_000)).toBeUndefined();
      await first.lock?.release('failed');
      const won = await attempt(peer, 'read-lock', 5_000);
      expect(won.lock).toBeDefined();
      expectReplicated(won.entry, written);
      await won.lock?.release('failed');
      // A deleted key reads as nothing.
      await peer.delete('read-lock');
      const after = await attempt(peer, 'read-lock', 5_000);
      expect(after.entry).toBeUndefined();
      await after.lock?.release('failed');
    },
  );

  it.skipIf(!lock || !commit)('commit stores the entry as set does and releases the lock', async () => {
    const cache = ctx.cache();
    const peer = await ctx.peer();
    const held = await committable(cache, 'committed', 5_000);
    const written = entry('committed', Date.now(), 60_000);
    expect(await held.commit(written, { ttl: 60_000 })).not.toBe(false);
    expectReplicated(
      await ctx.acrossReplicas(
        () => peer.get('committed'),
        (read) => read !== undefined,
      ),
      written,
    );
    const next = await acquire(peer, 'committed', 5_000);
    expect(next, 'the commit released the lock').toBeDefined();
    await next?.release('failed');
  });

  it.skipIf(!lock || !commit)(
    'a commit refused by a newer entry answers false, keeps the newer entry and still releases',
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const held = await committable(cache, 'refused-commit', 5_000);
      const now = Date.now();
      const newer = entry('newer', now + 1_000, 60_000);
      await peer.set('refused-commit', newer, { ttl: 60_000 });
      expect(await held.commit(entry('older', now, 60_000), { ttl: 60_000 })).toBe(false);
      expectReplicated(await peer.get('refused-commit'), newer);
      const next = await acquire(peer, 'refused-commit', 5_000);
      expect(next, 'the refused commit released the lock').toBeDefined();
      await next?.release('failed');
    },
  );

  it.skipIf(!lock || !commit)(
    "a lapsed holder's commit writes through the guard and leaves the next holder's lock",
    async () => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const lapsed = await committable(cache, 'lapsed-commit', SHORT);
      await ctx.wait(PAST_SHORT);
      const current = await acquire(peer, 'lapsed-commit', 5_000);
      expect(current).toBeDefined();
      const written = entry('late', Date.now(), 60_000);
      expect(await lapsed.commit(written, { ttl: 60_000 })).not.toBe(false);
      expectReplicated(
        await ctx.acrossReplicas(
          () => peer.get('lapsed-commit'),
          (read) => read !== undefined,
        ),
        written,
      );
      expect(await acquire(cache, 'lapsed-commit', 5_000), "the next holder's lock stands").toBeUndefined();
      await current?.release('failed');
    },
  );

  it.skipIf(!lock || !commit || !push)('a commit is heard as filled by onFillDone', async () => {
    const cache = ctx.cache();
    const listener = await ctx.peer();
    const onFillDone = listener.onFillDone?.bind(listener);
    if (onFillDone === undefined) throw new Error('the cache declares push but has no onFillDone');
    const heard: FillOutcome[] = [];
    const stop = onFillDone('heard-commit', (outcome) => heard.push(outcome));
    try {
      // A subscription may take a moment to land (pub/sub): commit until one is heard.
      for (let tries = 0; heard.length === 0 && tries < 20; tries++) {
        const held = await committable(cache, 'heard-commit', 5_000);
        await held.commit(entry(tries, Date.now(), 60_000), { ttl: 60_000 });
        await ctx.until(() => heard.length > 0, 100);
      }
      expect(heard.length).toBeGreaterThan(0);
      expect(new Set(heard)).toEqual(new Set(['filled']));
    } finally {
      stop();
    }
  });
}
