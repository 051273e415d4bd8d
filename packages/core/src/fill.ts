import { entryFor, keepLockAlive, physicalTtl, readEntryAsync, releaseLock, writeEntry } from './backend.js';
import { releaseRefreshSlot } from './background.js';
import type { FillLock, FillOutcome } from './cache.js';
import { emit, hasListeners } from './events.js';
import { callFill, fillSettled } from './fill-context.js';
import { Flight } from './flight.js';
import { acquireOrWait } from './lock-wait.js';
import type { FillContext, ResolvedOptions } from './options.js';
import type { CacheState } from './registry.js';
import { setLongTimeout } from './timers.js';

/** A fill function as the core calls it. */
export type FillFn = (context: FillContext<unknown>) => unknown;

/** Removes `flight` from the registry if it is still the one registered for its key. */
export function detach(state: CacheState, flight: Flight): void {
  if (state.flights.get(flight.key) === flight) state.flights.delete(flight.key);
}

function fillEvent(
  state: CacheState,
  flight: Flight,
  startedAt: number,
  outcome: 'ok' | 'error' | 'timeout',
): void {
  if (hasListeners()) {
    emit({
      type: 'fill',
      cache: state.name,
      key: flight.key,
      durationMs: Date.now() - startedAt,
      outcome,
      background: flight.background,
    });
  }
}

/** Registers a new flight for `key`, with its timeout and abandonment handling. */
export function startFlight(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  background: boolean,
): Flight {
  const flight = new Flight(key, background, Date.now());
  state.flights.set(key, flight);
  if (background) flight.onSettle = releaseRefreshSlot;
  flight.onAbandon = (reason) => {
    // Every caller left: nobody wants the value, so stop the fill and let the next caller start afresh.
    detach(state, flight);
    flight.settle({ ok: false, kind: 'abandoned', error: reason });
    flight.controller.abort(reason);
  };
  const limit = options.fillTimeout;
  if (limit !== undefined) {
    flight.deadline = flight.startedAt + limit;
    // A long timer (fillTimeout may exceed the 24.8-day timer limit), so it is cleared on settle.
    const timer = setLongTimeout(() => {
      const error = new Error(`fill of '${key}' did not settle within ${limit}ms (fillTimeout)`);
      error.name = 'TimeoutError';
      detach(state, flight);
      if (!flight.settle({ ok: false, kind: 'timeout', error })) return;
      state.counters.fillTimeouts++;
      if (background) state.counters.backgroundRefreshFailures++;
      fillEvent(state, flight, flight.startedAt, 'timeout');
      flight.controller.abort(error);
    }, limit);
    const onSettle = flight.onSettle;
    flight.onSettle = () => {
      timer.clear();
      onSettle?.();
    };
  }
  return flight;
}

/**
 * The value a fill's callers get: what a later hit will return. A cache that stores text gives it
 * back through its serializer (`Cache.roundTrip`), so the caller that filled does not get a `Date`
 * where every later hit gets a string. A value the serializer cannot carry is handed over as it is
 * (the write then reports it as a backend error).
 */
function asCached(state: CacheState, value: unknown): unknown {
  const { cache } = state;
  if (cache.roundTrip === undefined || value === undefined) return value;
  try {
    return cache.roundTrip(value);
  } catch {
    return value;
  }
}

/**
 * Writes a value (unless it came from another replica, is `undefined`, or the key was invalidated
 * meanwhile) and hands it to the flight's callers.
 *
 * The callers hear when the fill ends, not when the write lands: a slow backend delays nobody's
 * answer. Until the write has landed (or failed, which is reported) the flight stays registered,
 * already settled, so a caller of this process that arrives meanwhile joins it and gets the value
 * at once instead of reading a cache that does not have it yet (and starting a second fill).
 * Another replica reading during the write may miss. The returned promise (if any) settles when
 * the write has landed; the lock is released only after it, so a replica that waited for the lock
 * finds the value.
 *
 * A background refresh has no callers to answer early, so it keeps its flight (and its refresh
 * slot) until its write has landed, then settles.
 */
function deliver(
  state: CacheState,
  flight: Flight,
  value: unknown,
  write: boolean,
  options: ResolvedOptions,
): Promise<void> | undefined {
  if (flight.result !== undefined) return undefined;
  const pending =
    write && value !== undefined && !flight.invalidated
      ? writeEntry(state, flight.key, entryFor(value, flight.startedAt, options), physicalTtl(options))
      : undefined;
  if (flight.background) {
    const finish = (): void => {
      detach(state, flight);
      flight.settle({ ok: true, value });
    };
    if (pending === undefined) {
      finish();
      return undefined;
    }
    return pending.then(finish);
  }
  // Values from another replica were read from the cache: they are already what a hit returns.
  const answer = write ? asCached(state, value) : value;
  if (pending === undefined) {
    detach(state, flight);
    flight.settle({ ok: true, value: answer });
    return undefined;
  }
  flight.settle({ ok: true, value: answer });
  return pending.then(() => detach(state, flight));
}

/** Gives unfinished work to the platform's `waitUntil`, when the caller supplied one. */
export function handOff(options: ResolvedOptions, work: Promise<unknown>): void {
  if (options.waitUntil === undefined) return;
  try {
    options.waitUntil(work);
  } catch {
    // The platform refusing to extend the request only shortens the work's life.
  }
}

/**
 * Runs one flight to its end: the lock protocol when asked for, then the fill, the write and the
 * lock's release. Never rejects. Without the lock the fill function is called synchronously.
 */
export async function execute(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fill: FillFn,
  stale: unknown,
): Promise<void> {
  const { cache, counters } = state;
  const key = flight.key;
  // Every flight ends its lock protocol in exactly one of three counters, so that
  // `misses - coalescedWaits + backgroundRefreshes === fills + lockWaitHits + fillsCancelled` holds
  // whatever happens: `fills` (the fill function runs), `lockWaitHits` (another replica's value, found
  // while waiting or by the winner's double-check read) or `fillsCancelled` (the flight was given up
  // first: every caller left, or fillTimeout passed). Given up means `flight.result` is set.
  let lock: FillLock | undefined;
  if (options.lock) {
    if (cache.tryAcquireFillLock === undefined) {
      warnNoLock(state);
    } else {
      const got = await acquireOrWait(state, key, options, flight.controller.signal);
      if (got.kind === 'lock') lock = got.lock;
      if (got.kind === 'aborted' || flight.result !== undefined) {
        counters.fillsCancelled++;
        if (lock !== undefined) await releaseLock(state, key, lock, 'failed');
        return;
      }
      let found = got.kind === 'value' ? got.entry : undefined;
      if (lock !== undefined) {
        // Double-check: another replica may have filled between our miss and our lock.
        const entry = await readEntryAsync(state, key);
        if (flight.result !== undefined) {
          counters.fillsCancelled++;
          await releaseLock(state, key, lock, 'failed');
          return;
        }
        if (entry !== undefined && Date.now() < entry.freshUntil) found = entry;
      }
      if (found !== undefined) {
        counters.lockWaitHits++;
        deliver(state, flight, found.value, false, options);
        if (lock !== undefined) await releaseLock(state, key, lock, 'filled');
        return;
      }
    }
  }
  // The lock is released once: when the fill ends, or as soon as the flight is given up (fillTimeout,
  // every caller gone) even if the fill itself never returns, so it is not extended forever.
  let release: (outcome: FillOutcome) => Promise<void> = async () => {};
  if (lock !== undefined) {
    const held = lock;
    const stopExtending = keepLockAlive(state, key, held, options.lockTtl);
    let released = false;
    release = (outcome) => {
      if (released) return Promise.resolve();
      released = true;
      stopExtending();
      return releaseLock(state, key, held, outcome);
    };
    flight.controller.signal.addEventListener('abort', () => void release('failed'), { once: true });
  }
  const context: FillContext<unknown> = {
    key,
    signal: flight.controller.signal,
    stale,
    background: flight.background,
  };
  counters.fills++;
  const startedAt = Date.now();
  let value: unknown;
  try {
    let pending: unknown;
    try {
      pending = callFill(flight, fill, context);
    } catch (error) {
      // A synchronous throw settles a microtask later, like a rejection, so callers arriving in the
      // same tick coalesce onto it either way.
      pending = Promise.reject(error);
    }
    try {
      value = await pending;
    } finally {
      fillSettled(flight);
    }
  } catch (error) {
    if (flight.result === undefined) {
      counters.fillFailures++;
      if (flight.background) counters.backgroundRefreshFailures++;
      fillEvent(state, flight, startedAt, 'error');
      // The in-flight entry goes before the callers hear, so the next call retries from scratch.
      detach(state, flight);
      flight.settle({ ok: false, kind: 'fill', error });
    }
    await release('failed');
    return;
  }
  const settledBefore = flight.result !== undefined;
  if (!settledBefore) fillEvent(state, flight, startedAt, 'ok');
  const pending = deliver(state, flight, value, true, options);
  if (pending !== undefined) await pending;
  await release(settledBefore ? 'failed' : 'filled');
}

function warnNoLock(state: CacheState): void {
  if (state.warnedNoLock) return;
  state.warnedNoLock = true;
  const message =
    `stampede: distributedFillLock was asked of cache '${state.name}', which has no tryAcquireFillLock; ` +
    'protection is in-process only (one fill per process, not per fleet).';
  console.warn(message);
  if (hasListeners()) emit({ type: 'warning', cache: state.name, message });
}
