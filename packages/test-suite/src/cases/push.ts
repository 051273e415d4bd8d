import type { FillOutcome } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';
import { expectAnnounced, firstFilled, fullEntry, heldLock, record, untilHeard } from '../fill-done.js';

/** Push wake-up: `onFillDone` hears how a fill under the lock ended, on every instance. */
export function pushCases(ctx: SuiteContext): void {
  const { lock, push } = ctx.options.capabilities;

  it.skipIf(!lock || !push)('calls onFillDone with the outcome on release, until stopped', async () => {
    const holder = ctx.cache();
    const listener = await ctx.peer();
    const onFillDone = listener.onFillDone?.bind(listener);
    const tryAcquire = holder.tryAcquireFillLock?.bind(holder);
    if (onFillDone === undefined || tryAcquire === undefined) {
      throw new Error('the cache declares lock and push but lacks tryAcquireFillLock or onFillDone');
    }
    const fill = async (outcome: FillOutcome): Promise<void> => {
      const lock = await tryAcquire('announced', 5_000);
      expect(lock).toBeDefined();
      await lock?.release(outcome);
    };
    const heard: FillOutcome[] = [];
    const witness: FillOutcome[] = [];
    const stop = onFillDone('announced', (outcome) => heard.push(outcome));
    const stopWitness = onFillDone('announced', (outcome) => witness.push(outcome));
    try {
      // A subscription may take a moment to land (pub/sub): fill until the first one is heard.
      await fill('filled');
      for (let tries = 0; heard.length === 0 && tries < 20; tries++) {
        if (!(await ctx.until(() => heard.length > 0, 100))) await fill('filled');
      }
      expect(heard.length).toBeGreaterThan(0);
      expect(new Set(heard)).toEqual(new Set(['filled']));
      await fill('failed');
      expect(await ctx.until(() => heard.includes('failed'))).toBe(true);
      expect(heard.at(-1)).toBe('failed');

      stop();
      const before = heard.length;
      const seen = witness.length;
      await fill('filled');
      // The witness still listens: once it has heard this release, the stopped listener would have too.
      expect(await ctx.until(() => witness.length > seen)).toBe(true);
      expect(heard.length).toBe(before);
    } finally {
      stop();
      stopWitness();
    }
  });

  it.skipIf(!lock || !push)('does not call onFillDone for the fills of another key', async () => {
    const holder = ctx.cache();
    const listener = await ctx.peer();
    const heard: string[] = [];
    const stops = ['quiet', 'loud'].map(
      (key) => listener.onFillDone?.(key, () => heard.push(key)) ?? (() => {}),
    );
    try {
      let heardLoud = false;
      for (let tries = 0; !heardLoud && tries < 20; tries++) {
        const lock = await holder.tryAcquireFillLock?.('loud', 5_000);
        await lock?.release('filled');
        heardLoud = await ctx.until(() => heard.includes('loud'), 100);
      }
      expect(heardLoud).toBe(true);
      expect(heard).not.toContain('quiet');
    } finally {
      for (const stop of stops) stop();
    }
  });

  it.skipIf(!lock || !push)(
    "carries in a release's announcement, if anything, the entry a read gives right after it",
    async ({ skip }) => {
      const holder = ctx.cache();
      const listener = await ctx.peer();
      const recorder = record(listener, 'release-carries');
      try {
        expect(await untilHeard(ctx, holder, 'release-carries', recorder)).toBe(true);
        const lock = await heldLock(holder, 'release-carries', 5_000);
        await holder.set('release-carries', fullEntry(ctx, 'released', Date.now()), { ttl: 120_000 });
        await lock.release('filled');
        const heard = await firstFilled(ctx, recorder);
        expect(heard, "the release was heard as 'filled'").toBeDefined();
        const carried = heard?.announced?.entry;
        // Optional: most adapters announce a release's outcome alone, and waiters read the key.
        if (carried === undefined) return skip('releases announce the outcome alone (optional)');
        expect(typeof heard?.announced?.holder, 'the announcement names its holder').toBe('string');
        expectAnnounced(
          ctx,
          carried,
          await ctx.acrossReplicas(
            () => listener.get('release-carries'),
            (read) => read !== undefined,
          ),
        );
      } finally {
        recorder.stop();
      }
    },
  );

  // `ready` tells a waiter that no announcement can pass it by any more: it then skips a read. One
  // called before the subscription can hear would leave it asleep through the fill's end.
  it.skipIf(!lock || !push)('calls ready only once the listener hears every release', async ({ skip }) => {
    const holder = ctx.cache();
    const listener = await ctx.peer();
    const first = record(listener, 'ready');
    let second: ReturnType<typeof record> | undefined;
    try {
      // Optional: an adapter that never calls it keeps waiters on the poll schedule.
      if (!(await ctx.until(() => first.ready() > 0))) skip('onFillDone never calls ready (optional)');
      // One release, no retry: once ready, the listener must hear it.
      await (await heldLock(holder, 'ready', 5_000)).release('filled');
      expect(await ctx.until(() => first.heard.length > 0), 'heard after ready').toBe(true);
      // A listener added once the key is already heard is ready too, and hears the next release.
      second = record(listener, 'ready');
      expect(await ctx.until(() => second !== undefined && second.ready() > 0), 'ready again').toBe(true);
      await (await heldLock(holder, 'ready', 5_000)).release('failed');
      expect(await ctx.until(() => second?.heard.some((heard) => heard.outcome === 'failed') === true)).toBe(
        true,
      );
      expect(first.heard.map((heard) => heard.outcome)).toEqual(['filled', 'failed']);
    } finally {
      first.stop();
      second?.stop();
    }
  });

  // The core listens before its lock attempt where `hearsFillDone` says so, and a lost attempt then
  // reads nothing more: a `true` for a key whose announcements would not reach a new listener
  // leaves its waiters asleep through the fill's end.
  it.skipIf(!lock || !push)(
    'answers hearsFillDone true only when a listener added then hears the next release',
    async ({ skip }) => {
      const holder = ctx.cache();
      const listener = await ctx.peer();
      const hearsFillDone = listener.hearsFillDone?.bind(listener);
      if (hearsFillDone === undefined) return skip('no hearsFillDone (optional)');
      const key = 'hears';
      let answeredTrue = 0;
      // When it answers true, a listener added at that moment hears one release, with no retry.
      const check = async (when: string): Promise<void> => {
        const hears = hearsFillDone(key);
        expect(typeof hears, `hearsFillDone ${when}`).toBe('boolean');
        if (!hears) return;
        answeredTrue++;
        const added = record(listener, key);
        try {
          await (await heldLock(holder, key, 5_000)).release('filled');
          expect(await ctx.until(() => added.heard.length > 0), `heard, as hearsFillDone said ${when}`).toBe(
            true,
          );
        } finally {
          added.stop();
        }
      };
      await check('before anyone listened');
      const first = record(listener, key);
      try {
        expect(await untilHeard(ctx, holder, key, first)).toBe(true);
        // Acknowledged by now: an adapter may still answer false (the core then reads once).
        await check('while a listener hears the key');
      } finally {
        first.stop();
      }
      await check('after its last listener left');
      if (answeredTrue === 0) skip('hearsFillDone never answered true');
    },
  );
}
