import type { FillFn } from './fill.js';
import type { Flight } from './flight.js';
import type { FillContext } from './options.js';
import { type AsyncContextStorage, type FillFrame, shared } from './shared.js';

/**
 * Gives the core an `AsyncLocalStorage` to run fills in. The `node` entry point calls it; without it
 * (edge runtimes) fills run untracked and a fill that waits for its own key is bounded only by
 * `fillTimeout`. The first storage given wins, so every copy of the core uses the same one.
 */
export function useAsyncContext(create: () => AsyncContextStorage): void {
  shared.fills ??= { storage: create(), running: 0 };
}

/**
 * Calls `fill(context)` in an async context that remembers which flight it fills, so that a
 * `getOrCompute` made from inside it (after any number of awaits) can tell it would wait for itself.
 * Only fills pay for this; hits never look at the context.
 */
export function callFill(flight: Flight, fill: FillFn, context: FillContext<unknown>): unknown {
  const tracking = shared.fills;
  // A background refresh (stale-while-revalidate, early refresh) runs untracked: its own key still
  // holds a servable value while it runs, so a read of that key from inside it is a hit or a stale
  // hit, not a wait. Tracking it would keep Node's promise hooks on for the whole refresh, slowing
  // every promise in the process exactly while readers crowd in on the stale value. Only if that
  // value vanished meanwhile (deleted, evicted, past its grace) does such a read join the refresh:
  // then it waits as on the edge build, bounded by `fillTimeout`.
  if (tracking === undefined || shared.detectSelfCalls === false) return fill(context);
  const { storage } = tracking;
  if (flight.background) {
    // Started from inside a tracked fill (a stale read in it), it is awaited by nobody: a frame that
    // is already done cuts it off from that fill's chain, so it may read that fill's key.
    if (storage.getStore() === undefined) return fill(context);
    return storage.run({ flight, parent: undefined, done: true }, () => fill(context));
  }
  // A foreground fill started from inside another fill is usually awaited by it, so it stays part of
  // that fill.
  const frame: FillFrame = { flight, parent: storage.getStore(), done: false };
  flight.frame = frame;
  tracking.running++;
  return storage.run(frame, () => fill(context));
}

/** Marks `flight`'s fill function as settled: nothing can be waiting inside it any more. */
export function fillSettled(flight: Flight): void {
  const frame = flight.frame;
  const tracking = shared.fills;
  if (frame === undefined || frame.done || tracking === undefined) return;
  frame.done = true;
  tracking.running--;
  // On Node an enabled AsyncLocalStorage costs something on every promise the process creates: keep
  // it enabled only while a fill runs. Frames left on old async resources are all `done`, so they
  // mean nothing if it is enabled again later.
  if (tracking.running === 0) tracking.storage.disable?.();
}

/**
 * True when the code running now is part of `flight`'s fill (directly, or inside a foreground fill
 * that the fill started and has not finished): joining `flight` would then wait for itself forever.
 */
export function insideFillOf(flight: Flight): boolean {
  const tracking = shared.fills;
  if (tracking === undefined) return false;
  for (let frame = tracking.storage.getStore(); frame !== undefined && !frame.done; frame = frame.parent) {
    if (frame.flight === flight) return true;
  }
  return false;
}

/** The error a call gets instead of waiting for its own fill. */
export function selfWaitError(cacheName: string, key: string): TypeError {
  return new TypeError(
    `getOrCompute was called for key '${key}' on cache '${cacheName}' from inside the fill of that ` +
      'same key (directly, or through a fill it started): it would wait for its own result forever. ' +
      'Compute the value inside the fill without reading the same key through the cache.',
  );
}
