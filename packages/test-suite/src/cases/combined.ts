import type { Cache, CacheEntry, FillLock, FillLockAttempt, FillOutcome } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { entry, expectReplicated } from '../entries.js';
import { expectAnnounced, firstFilled, fullEntry, record, untilHeard } from '../fill-done.js';

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

  // A waiter that lost to this holder takes the announced entry instead of reading the key: it must
  // be what that read would give, every field the envelope carries included.
  it.skipIf(!lock || !commit || !push)(
    "carries in a commit's announcement, if anything, the entry a read gives right after it",
    async ({ skip }) => {
      const cache = ctx.cache();
      const listener = await ctx.peer();
      const written: [string, CacheEntry][] = [['announced', fullEntry(ctx, 'announced', Date.now())]];
      if (ctx.options.capabilities.tags === true) {
        written.push(['announced-tagged', fullEntry(ctx, 'tagged', Date.now(), ['t1', 't2'])]);
      }
      let carried = 0;
      for (const [key, sent] of written) {
        const recorder = record(listener, key);
        try {
          expect(await untilHeard(ctx, cache, key, recorder)).toBe(true);
          const held = await committable(cache, key, 5_000);
          expect(await held.commit(sent, { ttl: 120_000 })).not.toBe(false);
          const heard = await firstFilled(ctx, recorder);
          expect(heard, `the commit of '${key}' was heard as 'filled'`).toBeDefined();
          const read = await ctx.acrossReplicas(
            () => listener.get(key),
            (found) => found !== undefined,
          );
          expectReplicated(read, sent);
          const announced = heard?.announced;
          // Optional per announcement (a value too big to carry, tags it cannot check there).
          if (announced?.entry === undefined) continue;
          carried++;
          expect(typeof announced.holder, 'the announcement names its holder').toBe('string');
          expectAnnounced(ctx, announced.entry, read);
        } finally {
          recorder.stop();
        }
      }
      if (carried === 0) skip('commits announce the outcome alone (optional)');
    },
  );

  it.skipIf(!lock || !commit || !push)(
    "carries in a refused commit's announcement, if anything, the newer entry that refused it",
    async ({ skip }) => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const recorder = record(peer, 'announced-refusal');
      try {
        expect(await untilHeard(ctx, cache, 'announced-refusal', recorder)).toBe(true);
        const held = await committable(cache, 'announced-refusal', 5_000);
        const now = Date.now();
        const newer = fullEntry(ctx, 'newer', now + 1_000);
        await peer.set('announced-refusal', newer, { ttl: 120_000 });
        expect(await held.commit(fullEntry(ctx, 'older', now), { ttl: 120_000 })).toBe(false);
        const heard = await firstFilled(ctx, recorder);
        expect(heard, "the refused commit was heard as 'filled'").toBeDefined();
        const announced = heard?.announced?.entry;
        if (announced === undefined) return skip('commits announce the outcome alone (optional)');
        expect(announced.value, 'the announced value').toEqual('newer');
        expectAnnounced(ctx, announced, await peer.get('announced-refusal'));
      } finally {
        recorder.stop();
      }
    },
  );

  // A waiter takes an announced value only from the holder its lost attempt named: that holder
  // committed after the attempt's read. A holder named wrongly, or the same for two grants, would
  // let it take an older fill's value announced late (from before a delete it saw).
  it.skipIf(!lock || !lockAndRead)(
    'a lost tryAcquireFillLockAndRead names the holder, the same from every instance, another for the next grant',
    async ({ skip }) => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const first = await attempt(cache, 'holder', 5_000);
      expect(first.lock).toBeDefined();
      const lostThere = await attempt(peer, 'holder', 5_000);
      const lostHere = await attempt(cache, 'holder', 5_000);
      expect(lostThere.lock).toBeUndefined();
      expect(lostHere.lock).toBeUndefined();
      await first.lock?.release('failed');
      if (lostThere.holder === undefined && lostHere.holder === undefined) {
        return skip('tryAcquireFillLockAndRead names no holder (optional)');
      }
      expect(typeof lostThere.holder).toBe('string');
      expect(lostHere.holder, 'the same holder from both instances').toBe(lostThere.holder);
      const next = await attempt(peer, 'holder', 5_000);
      expect(next.lock).toBeDefined();
      const lostAgain = await attempt(cache, 'holder', 5_000);
      expect(lostAgain.lock).toBeUndefined();
      expect(typeof lostAgain.holder).toBe('string');
      expect(lostAgain.holder, 'the next grant is another holder').not.toBe(lostThere.holder);
      await next.lock?.release('failed');
    },
  );

  it.skipIf(!lock || !lockAndRead || !commit || !push)(
    "names in a commit's announcement the holder a lost tryAcquireFillLockAndRead named",
    async ({ skip }) => {
      const cache = ctx.cache();
      const peer = await ctx.peer();
      const recorder = record(peer, 'holder-named');
      try {
        expect(await untilHeard(ctx, cache, 'holder-named', recorder)).toBe(true);
        const named: (string | undefined)[] = [];
        const announcedBy: (string | undefined)[] = [];
        // Two grants in turn, one on each instance: each commit names its own holder.
        for (const [winner, loser] of [
          [cache, peer],
          [peer, cache],
        ] as const) {
          recorder.heard.length = 0;
          const won = await attempt(winner, 'holder-named', 5_000);
          const held = won.lock;
          if (held?.commit === undefined) throw new Error('the lock was refused, or has no commit');
          const lost = await attempt(loser, 'holder-named', 5_000);
          expect(lost.lock).toBeUndefined();
          named.push(lost.holder);
          await held.commit(entry(named.length, Date.now(), 60_000), { ttl: 60_000 });
          const heard = await firstFilled(ctx, recorder);
          expect(heard, "the commit was heard as 'filled'").toBeDefined();
          announcedBy.push(heard?.announced?.holder);
        }
        // Both are optional ("unknown"): compared wherever both were given.
        const compared = named.filter((holder, i) => holder !== undefined && announcedBy[i] !== undefined);
        if (compared.length === 0) {
          return skip('no lost attempt and announcement both named a holder (optional)');
        }
        for (const [i, holder] of named.entries()) {
          if (holder === undefined || announcedBy[i] === undefined) continue;
          expect(announcedBy[i], `announcement ${i + 1} names the holder its lost attempt named`).toBe(
            holder,
          );
        }
        if (named[0] !== undefined && named[1] !== undefined) expect(named[0]).not.toBe(named[1]);
      } finally {
        recorder.stop();
      }
    },
  );
}
