import {
  entryFor,
  isThenable,
  keepLockAlive,
  physicalTtl,
  readEntryAsync,
  releaseLock,
  writeEntry,
} from './backend.js';
import { releaseRefreshSlot } from './background.js';
import type { FillLock, FillOutcome } from './cache.js';
import { type CheckResult, checkCached, checkEvent, fillCheckFailure } from './check-value.js';
import { emit, hasListeners } from './events.js';
import { callFill, fillSettled } from './fill-context.js';
import { Flight } from './flight.js';
import { acquireOrWait } from './lock-wait.js';
import type { FillContext, ResolvedOptions } from './options.js';
import type { CacheState } from './registry.js';

/** A fill function as the core calls it. */
export type FillFn = (context: FillContext<unknown>) => unknown;

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

function startFlight(state: CacheState, key: string, options: ResolvedOptions, background: boolean): Flight {
  return new Flight({
    key,
    background,
    registry: state.flights,
    fillTimeout: options.fillTimeout,
    onTimeout: (flight) => {
      state.counters.fillTimeouts++;
      if (background) state.counters.backgroundRefreshFailures++;
      fillEvent(state, flight, flight.startedAt, 'timeout');
    },
    // A refresh holds one of the process's background-refresh slots until it settles.
    onSettle: background ? releaseRefreshSlot : undefined,
    tags: options.tags,
  });
}

/** Registers a fill that callers wait for (a miss); the caller that starts it joins as its leader. */
export function startForegroundFlight(state: CacheState, key: string, options: ResolvedOptions): Flight {
  return startFlight(state, key, options, false);
}

/** Registers a stale-while-revalidate refresh, which no caller waits for. */
export function startBackgroundFlight(state: CacheState, key: string, options: ResolvedOptions): Flight {
  return startFlight(state, key, options, true);
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
 * Hands a value another replica wrote (found while waiting for the lock, or by the double-check
 * read) to the flight's callers. It was read from the cache, so it is already what a hit returns,
 * and there is nothing to write.
 */
function deliverFound(flight: Flight, value: unknown): void {
  if (flight.result !== undefined) return;
  flight.detach();
  flight.settle({ ok: true, value });
}

/**
 * Writes the fill's value (unless it is `undefined` or the key was invalidated meanwhile) and hands
 * it to the flight's callers.
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
function deliverFilled(
  state: CacheState,
  flight: Flight,
  value: unknown,
  options: ResolvedOptions,
  checked?: { readonly value: unknown },
): Promise<void> | undefined {
  if (flight.result !== undefined) return undefined;
  const pending =
    value !== undefined && !flight.invalidated
      ? writeEntry(state, flight.key, entryFor(value, flight.startedAt, options), physicalTtl(options))
      : undefined;
  if (flight.background) {
    const finish = (): void => {
      flight.detach();
      flight.settle({ ok: true, value });
    };
    if (pending === undefined) {
      finish();
      return undefined;
    }
    return pending.then(finish);
  }
  const answer = checked === undefined ? asCached(state, value) : checked.value;
  if (pending === undefined) {
    flight.detach();
    flight.settle({ ok: true, value: answer });
    return undefined;
  }
  flight.settle({ ok: true, value: answer });
  return pending.then(() => flight.detach());
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
 * What the lock phase leaves to do: run the fill (holding the fleet's lock, or with `lock`
 * undefined: without it, after a lock wait that timed out or a backend fault), hand over a value
 * another replica wrote (releasing the lock, if held, as `'filled'`), or stop (the flight was given
 * up while the lock phase ran; the lock phase has already counted it and released its lock).
 */
type LockPhaseResult =
  | { readonly kind: 'fill'; readonly lock: FillLock | undefined }
  | { readonly kind: 'found'; readonly value: unknown; readonly lock: FillLock | undefined }
  | { readonly kind: 'stop' };

const FILL_WITHOUT_LOCK: LockPhaseResult = { kind: 'fill', lock: undefined };

/**
 * Runs one flight to its end: the lock phase when the fleet's lock is asked for, then the fill phase.
 * Never rejects. Without the lock the fill function is called synchronously, in this call.
 *
 * Every flight ends its lock phase in exactly one of three counters, so that
 * `misses - coalescedWaits + backgroundRefreshes === fills + lockWaitHits + fillsCancelled` holds
 * whatever happens: `fills` (the fill function runs), `lockWaitHits` (another replica's value) or
 * `fillsCancelled` (the flight was given up first: every caller left, or `fillTimeout` passed).
 */
export async function execute(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fill: FillFn,
  stale: unknown,
): Promise<void> {
  const next = usesFleetLock(state, options) ? await lockPhase(state, flight, options) : FILL_WITHOUT_LOCK;
  if (next.kind === 'stop') return;
  if (next.kind === 'found') {
    const found =
      options.check === undefined ? next : await checkCached(state, flight.key, next.value, options.check);
    if (found !== undefined) {
      state.counters.lockWaitHits++;
      deliverFound(flight, found.value);
      if (next.lock !== undefined) await releaseLock(state, flight.key, next.lock, 'filled');
      return;
    }
    // Another replica's value failed the check (written by other code): fill it here instead.
  }
  await fillPhase(state, flight, options, fill, stale, next.lock);
}

/** True when the flight should take the fleet's lock; warns (once) if the cache cannot give one. */
function usesFleetLock(state: CacheState, options: ResolvedOptions): boolean {
  if (!options.lock) return false;
  if (state.cache.tryAcquireFillLock !== undefined) return true;
  warnNoLock(state);
  return false;
}

/**
 * Takes the fleet's fill lock or waits for the replica that holds it (`acquireOrWait`). With the
 * lock, reads the cache once more: another replica may have filled between our miss and our lock.
 */
async function lockPhase(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
): Promise<LockPhaseResult> {
  const key = flight.key;
  const got = await acquireOrWait(state, key, options, flight.controller.signal);
  const lock = got.kind === 'lock' ? got.lock : undefined;
  // Given up means `flight.result` is set (see `Flight.result`).
  if (got.kind === 'aborted' || flight.result !== undefined) return stopped(state, key, lock);
  if (got.kind === 'value') return { kind: 'found', value: got.entry.value, lock: undefined };
  if (lock === undefined) return FILL_WITHOUT_LOCK;
  const entry = await readEntryAsync(state, key);
  if (flight.result !== undefined) return stopped(state, key, lock);
  if (entry !== undefined && Date.now() < entry.freshUntil)
    return { kind: 'found', value: entry.value, lock };
  return { kind: 'fill', lock };
}

async function stopped(state: CacheState, key: string, lock: FillLock | undefined): Promise<LockPhaseResult> {
  state.counters.fillsCancelled++;
  if (lock !== undefined) await releaseLock(state, key, lock, 'failed');
  return { kind: 'stop' };
}

/**
 * Calls the fill, then delivers its value (or its error) and releases the lock, if one is held. The
 * fill function is called synchronously, before this function first yields.
 */
async function fillPhase(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fill: FillFn,
  stale: unknown,
  lock: FillLock | undefined,
): Promise<void> {
  const { counters } = state;
  const release = lock === undefined ? releaseNothing : holdLock(state, flight, lock, options.lockTtl);
  const context: FillContext<unknown> = {
    key: flight.key,
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
      // The flight leaves the registry before the callers hear, so the next call retries from scratch.
      flight.detach();
      flight.settle({ ok: false, kind: 'fill', error });
    }
    await release('failed');
    return;
  }
  let checked: CheckResult | undefined;
  if (options.check !== undefined && flight.result === undefined) {
    // What later hits will be checked against: the value as the cache gives it back.
    const result = options.check(asCached(state, value));
    checked = isThenable(result) ? await result : result;
    if (!checked.ok) {
      if (flight.result === undefined) {
        counters.fillFailures++;
        counters.checkValueFailures++;
        if (flight.background) counters.backgroundRefreshFailures++;
        checkEvent(state, flight.key, 'fill', checked.issues);
        fillEvent(state, flight, startedAt, 'error');
        flight.detach();
        flight.settle({ ok: false, kind: 'fill', error: fillCheckFailure(checked.issues) });
      }
      await release('failed');
      return;
    }
  }
  // A flight given up while its fill ran (fillTimeout, every caller gone) has answered its callers
  // already: its value is neither delivered nor written, and the lock is released as failed.
  const givenUp = flight.result !== undefined;
  if (!givenUp) fillEvent(state, flight, startedAt, 'ok');
  const pending = deliverFilled(state, flight, value, options, checked?.ok ? checked : undefined);
  if (pending !== undefined) await pending;
  await release(givenUp ? 'failed' : 'filled');
}

const releaseNothing = async (_outcome: FillOutcome): Promise<void> => {};

/**
 * Keeps `lock` extended while the fill runs and returns its release, which acts once: when the fill
 * ends, or as soon as the flight is given up (fillTimeout, every caller gone) even if the fill itself
 * never returns, so the lock is not extended forever.
 */
function holdLock(
  state: CacheState,
  flight: Flight,
  lock: FillLock,
  lockTtl: number,
): (outcome: FillOutcome) => Promise<void> {
  const key = flight.key;
  const stopExtending = keepLockAlive(state, key, lock, lockTtl);
  let released = false;
  const release = (outcome: FillOutcome): Promise<void> => {
    if (released) return Promise.resolve();
    released = true;
    stopExtending();
    return releaseLock(state, key, lock, outcome);
  };
  const { signal } = flight.controller;
  // Given up between the lock phase and now: nothing will abort again, so release at once.
  if (signal.aborted) void release('failed');
  else signal.addEventListener('abort', () => void release('failed'), { once: true });
  return release;
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
