import type { Cache, CacheEntry, FillAnnouncement, FillLock, FillOutcome } from '@stampede/core';
import { expect } from 'vitest';
import type { SuiteContext } from './context.js';
import { entry, expectRoundTrip } from './entries.js';

/** One announcement a listener heard: the outcome, and what it carried besides (if anything). */
export interface Heard {
  readonly outcome: FillOutcome;
  readonly announced: FillAnnouncement | undefined;
}

/** A listener added with `onFillDone`, recording what it hears and how often `ready` was called. */
export interface Recorder {
  /** Every announcement heard, oldest first. */
  readonly heard: Heard[];
  /** How many times the listener's `ready` was called. */
  readonly ready: () => number;
  /** Stops listening (the function `onFillDone` returned). */
  stop(): void;
}

/** Listens for the fills of `key` on `cache`. */
export function record(cache: Cache, key: string): Recorder {
  const onFillDone = cache.onFillDone;
  if (onFillDone === undefined) throw new Error('the cache declares push: true but has no onFillDone');
  const heard: Heard[] = [];
  let ready = 0;
  const stop = onFillDone.call(
    cache,
    key,
    (outcome, announced) => {
      heard.push({ outcome, announced });
    },
    () => {
      ready++;
    },
  );
  return { heard, ready: () => ready, stop };
}

/** The lock of `key` on `cache`; throws when it is refused. */
export async function heldLock(cache: Cache, key: string, ttl: number): Promise<FillLock> {
  const tryAcquire = cache.tryAcquireFillLock;
  if (tryAcquire === undefined)
    throw new Error('the cache declares lock: true but has no tryAcquireFillLock');
  const lock = await tryAcquire.call(cache, key, ttl);
  if (lock === undefined || lock === null) throw new Error(`the lock of '${key}' is taken`);
  return lock;
}

/**
 * Waits until `recorder` hears the fills of `key` held on `holder`: a subscription may take a moment
 * to land (pub/sub), so it releases as `'failed'` until one is heard (the cases then look for
 * `'filled'` only, so a late one of these cannot be taken for what they check).
 */
export async function untilHeard(
  ctx: SuiteContext,
  holder: Cache,
  key: string,
  recorder: Recorder,
): Promise<boolean> {
  for (let tries = 0; tries < 20; tries++) {
    await (await heldLock(holder, key, 5_000)).release('failed');
    if (await ctx.until(() => recorder.heard.length > 0, 100)) return true;
  }
  return false;
}

/** The first `'filled'` announcement `recorder` heard, once it has (up to 2 s). */
export async function firstFilled(ctx: SuiteContext, recorder: Recorder): Promise<Heard | undefined> {
  const find = () => recorder.heard.find((heard) => heard.outcome === 'filled');
  await ctx.until(() => find() !== undefined);
  return find();
}

/**
 * An entry with every field an envelope carries set to something a careless adapter could lose:
 * a grace period (`staleUntil` after `freshUntil`), a `delta` unless the cache declares it cannot
 * keep one, and `tags` when asked.
 */
export function fullEntry(ctx: SuiteContext, value: unknown, createdAt: number, tags?: string[]): CacheEntry {
  const base = entry(value, createdAt, 60_000, 30_000);
  const delta = ctx.options.capabilities.delta === false ? undefined : 137;
  return {
    ...base,
    ...(delta === undefined ? {} : { delta }),
    ...(tags === undefined ? {} : { tags }),
  };
}

/**
 * Asserts that an announced entry is what a read of the key gave right after the fill: the value,
 * `tags` and `delta` exactly, and the times exactly (with `serverClock`, shifted together by at
 * most 50 ms: each is converted from the backend's clock).
 */
export function expectAnnounced(
  ctx: SuiteContext,
  announced: CacheEntry,
  read: CacheEntry | undefined,
): void {
  expect(read, 'a read right after the fill').toBeDefined();
  if (read === undefined) return;
  expectRoundTrip(announced, read, ctx.options.capabilities.serverClock);
}
