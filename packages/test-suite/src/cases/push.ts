import type { FillOutcome } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';

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
}
