import {
  commitEntry,
  entryFor,
  isThenable,
  keepLockAlive,
  physicalTtl,
  readEntryAsync,
  releaseLock,
  writeEntry,
} from './backend.js';
import { releaseRefreshSlot } from './background.js';
import type { CacheEntry, CacheSetOptions, FillLock, FillOutcome } from './cache.js';
import { type CheckResult, checkCached, checkEvent, fillCheckFailure } from './check-value.js';
import { messageOf } from './errors.js';
import { emit, hasListeners } from './events.js';
import { activate, confirmFallback, type Fallback, softTimeout } from './fail-safe.js';
import { callFill, fillSettled } from './fill-context.js';
import { answered, answeredWith, Flight, type FlightResult, type Rescue } from './flight.js';
import { trackWork } from './idle.js';
import { warnIfNotKeptAlive } from './isolated-flights.js';
import { acquireOrWait, type WaitHint } from './lock-wait.js';
import type { FillContext, ResolvedOptions } from './options.js';
import type { CacheState } from './registry.js';
import { reportWarning } from './stats.js';
import { startedAfterInvalidations } from './tags.js';
import { type LongTimeout, setLongTimeout } from './timers.js';

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
      // Never negative, even when the clock was set back meanwhile.
      durationMs: Math.max(0, Date.now() - startedAt),
      outcome,
      background: flight.background,
    });
  }
}

/** Whether `flight` was given up because every caller left (its fill may still be running). */
function abandoned(flight: Flight): boolean {
  const result = flight.result;
  return result !== undefined && !result.ok && result.kind === 'abandoned';
}

function startFlight(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  background: boolean,
  fallback: Fallback | undefined,
): Flight {
  // A refresh holds one of the process's background-refresh slots until it settles; so does a fill
  // that went on in the background after its soft timeout.
  let holdsSlot = background;
  let soft: LongTimeout | undefined;
  warnIfNotKeptAlive(state, options.waitUntil);
  const flight = new Flight({
    key,
    background,
    registry: state.flights,
    fillTimeout: options.fillTimeout,
    fallback,
    onTimeout: () => {
      state.counters.fillTimeouts++;
      if (background) state.counters.backgroundRefreshFailures++;
      // A fill event is a fill function that ran: not a flight given up during its lock wait.
      if (flight.fillStarted) fillEvent(state, flight, flight.startedAt, 'timeout');
    },
    rescue:
      fallback === undefined
        ? undefined
        : () => {
            const toRescue = (confirmed: Fallback | undefined): Rescue | undefined =>
              confirmed === undefined
                ? undefined
                : {
                    answer: answered(confirmed.entry.value, confirmed.stored.value),
                    activate: () => {
                      activate(state, flight, options, confirmed, 'timeout');
                      // The fill may never return: the re-arm's write goes to the platform on its own.
                      if (flight.rearming !== undefined) handOff(state, options, flight.rearming);
                    },
                  };
            const confirming = confirmFallback(state, flight, options);
            return isThenable<Fallback | undefined>(confirming)
              ? confirming.then(toRescue)
              : toRescue(confirming);
          },
    onSettle: () => {
      soft?.clear();
      if (holdsSlot) {
        holdsSlot = false;
        releaseRefreshSlot();
      }
    },
    tags: options.tags,
    check: options.check,
    handedOff: options.waitUntil !== undefined,
  });
  if (!background && fallback !== undefined && options.softTimeout !== undefined) {
    soft = setLongTimeout(() => {
      const answer = (confirmed: Fallback | undefined): void => {
        if (softTimeout(state, flight, confirmed)) holdsSlot = true;
      };
      const confirming = confirmFallback(state, flight, options);
      if (isThenable<Fallback | undefined>(confirming)) void confirming.then(answer);
      else answer(confirming);
    }, options.softTimeout);
  }
  return flight;
}

/**
 * Registers a fill that callers wait for (a miss); the caller that starts it joins as its leader.
 * `fallback` is fail-safe's previous value, if any.
 */
export function startForegroundFlight(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  fallback?: Fallback,
): Flight {
  return startFlight(state, key, options, false, fallback);
}

/**
 * Registers a background refresh (stale-while-revalidate or early), which no caller waits for.
 * `fallback` is fail-safe's previous value, if any.
 */
export function startBackgroundFlight(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  fallback?: Fallback,
): Flight {
  return startFlight(state, key, options, true, fallback);
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
function deliverFound(flight: Flight, value: unknown, stored: unknown): void {
  if (flight.result !== undefined) return;
  flight.detach();
  flight.settle(answered(value, stored));
}

/**
 * Writes the fill's value (unless it is `undefined` or the key was invalidated meanwhile), created
 * at `createdAt` (when the fill function was called), and hands it to the flight's callers.
 *
 * The callers hear when the fill ends, not when the write lands: a slow backend delays nobody's
 * answer. Until the write has landed (or failed, which is reported) the flight stays registered,
 * already settled, so a caller of this process that arrives meanwhile (while the value is fresh:
 * `Flight.freshUntil`) joins it and gets the value at once instead of reading a cache that does not
 * have it yet (and starting a second fill).
 * Another replica reading during the write may miss. The returned promise (if any) settles when
 * the write has landed; the lock is released only after it, so a replica that waited for the lock
 * finds the value. With `commit` (a lock that writes and releases in one step, `FillLock.commit`)
 * the write is that commit, and the lock is released by it.
 *
 * A background refresh has no callers to answer early, so it keeps its flight (and its refresh
 * slot) until its write has landed, then settles.
 */
function deliverFilled(
  state: CacheState,
  flight: Flight,
  value: unknown,
  options: ResolvedOptions,
  createdAt: number,
  delta: number,
  checked: { readonly value: unknown; readonly stored: unknown } | undefined,
  commit: Commit | undefined,
): Promise<void> | undefined {
  if (flight.result !== undefined) return undefined;
  let pending: Promise<void> | undefined;
  if (value !== undefined && !flight.invalidated) {
    const entry = entryFor(value, createdAt, options, delta);
    flight.freshUntil = entry.freshUntil;
    const ttl = physicalTtl(options);
    // A fill that started after every invalidation of its tags this process made says so: an
    // in-process cache then keeps it even in their millisecond (see CacheSetOptions).
    const after =
      entry.tags !== undefined && startedAfterInvalidations(entry.tags, flight.invalidationsBefore)
        ? true
        : undefined;
    pending =
      commit === undefined
        ? writeEntry(state, flight.key, entry, ttl, undefined, after)
        : commit(entry, after === undefined ? { ttl } : { ttl, afterInvalidations: after });
  }
  // What a hit of the value written gives: through the cache's serializer, then the check.
  const result = (): FlightResult => {
    if (checked !== undefined) return answered(checked.value, checked.stored);
    const stored = asCached(state, value);
    return answered(stored, stored);
  };
  if (flight.background) {
    const finish = (): void => {
      flight.detach();
      // A refresh's own caller has the stale value: only a miss that joined it takes this one.
      flight.settle(flight.waited() ? result() : { ok: true, value });
    };
    if (pending === undefined) {
      finish();
      return undefined;
    }
    return pending.then(finish);
  }
  const answer = result();
  if (pending === undefined) {
    flight.detach();
    flight.settle(answer);
    return undefined;
  }
  flight.settle(answer);
  return pending.then(() => flight.detach());
}

/**
 * Records unfinished work as running on the cache (for `whenIdle`), and gives it to the platform's
 * `waitUntil` when the caller supplied one.
 */
export function handOff(state: CacheState, options: ResolvedOptions, work: Promise<unknown>): void {
  trackWork(state, work);
  if (options.waitUntil === undefined) return;
  try {
    options.waitUntil(work);
  } catch (error) {
    // The work still runs, but nothing keeps it alive after the response: on an edge runtime the
    // write, the lock release or the refresh is cancelled. The usual cause is a method passed
    // without its object (`ctx.waitUntil`: "Illegal invocation"), which fails every time.
    if (state.warnedWaitUntil === true) return;
    state.warnedWaitUntil = true;
    reportWarning(state.name, waitUntilThrew(`cache '${state.name}'`, error));
  }
}

/** The warning for a `waitUntil` that threw: the work handed to it is not kept alive after the response. */
function waitUntilThrew(where: string, error: unknown): string {
  return (
    `stampede: the waitUntil given to ${where} threw (${messageOf(error)}): the work handed to it ` +
    '(writes, lock releases, background refreshes) is not kept alive after the response. Pass the ' +
    "platform's waitUntil bound to its object: `(promise) => ctx.waitUntil(promise)`, " +
    "`ctx.waitUntil.bind(ctx)`, or `import { waitUntil } from 'cloudflare:workers'`."
  );
}

/**
 * What the lock phase leaves to do: run the fill (holding the fleet's lock, or with `lock`
 * undefined: without it, after a lock wait that timed out or a backend fault), hand over a value
 * another replica wrote (releasing the lock, if held, as `'filled'`), or stop (the flight was given
 * up while the lock phase ran; the lock phase has already counted it and released its lock).
 */
type LockPhaseResult =
  | { readonly kind: 'fill'; readonly lock: FillLock | undefined }
  | {
      readonly kind: 'found';
      readonly value: unknown;
      readonly createdAt: number;
      readonly lock: FillLock | undefined;
    }
  | { readonly kind: 'stop' };

const FILL_WITHOUT_LOCK: LockPhaseResult = { kind: 'fill', lock: undefined };

/**
 * Runs one flight to its end: the lock phase when the fleet's lock is asked for, then the fill phase.
 * Never rejects. Without the lock the fill function is called synchronously, in this call.
 *
 * Every flight ends its lock phase in exactly one of three counters, so that
 * `misses - coalescedWaits + backgroundRefreshes === fills + lockWaitHits + fillsCancelled` holds
 * whatever happens: `fills` (the fill function runs), `lockWaitHits` (another replica's value) or
 * `fillsCancelled` (the flight was given up first: every caller left, or `fillTimeout` passed; or
 * an early refresh left the refresh to the replica holding the lock).
 *
 * `hint` is what the flight read before it started: the lock phase times its first look for another
 * replica's value by the entry's `delta`, and an early refresh (`hint.early`) needs a value newer
 * than that still-fresh entry.
 */
export async function execute(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fill: FillFn,
  stale: unknown,
  hint?: WaitHint,
): Promise<void> {
  try {
    await runFlight(state, flight, options, fill, stale, hint);
  } catch (error) {
    // Only a defect gets here (the phases catch what the fill, the backend and the user's callbacks
    // throw): its callers get it as the fill's error instead of waiting forever, and the key is free.
    if (flight.result === undefined) {
      flight.detach();
      flight.settle({ ok: false, kind: 'fill', error });
    }
  }
}

/** {@link execute}'s phases. */
async function runFlight(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  fill: FillFn,
  stale: unknown,
  hint: WaitHint | undefined,
): Promise<void> {
  const locked = usesFleetLock(state, options);
  let wait = hint;
  for (let refusals = 0; ; refusals++) {
    const next = locked ? await lockPhase(state, flight, options, wait) : FILL_WITHOUT_LOCK;
    if (next.kind === 'stop') return;
    if (next.kind === 'found') {
      const found =
        options.check === undefined ? next : await checkCached(state, flight.key, next.value, options.check);
      if (found !== undefined) {
        state.counters.lockWaitHits++;
        deliverFound(flight, found.value, next.value);
        if (next.lock !== undefined) await releaseLock(state, flight.key, next.lock, 'filled');
        return;
      }
      // Another replica's value failed the check (written by other code, a deploy changing the
      // value's shape). With the lock: fill it here. Without (it was found while the lock was held
      // elsewhere): wait again, for a value newer than this one, as the holder may be filling one
      // the check passes; after a few refused values, fill here.
      if (next.lock === undefined && refusals < REFUSED_WAITS && flight.result === undefined) {
        wait = { previous: wait?.previous, early: wait?.early === true, refusedAt: next.createdAt };
        continue;
      }
    }
    await fillPhase(state, flight, options, fill, stale, next.lock);
    return;
  }
}

// How many values a lock waiter's `checkValue` may refuse before it fills without the lock.
const REFUSED_WAITS = 3;

/** True when the flight should take the fleet's lock; warns (once) if the cache cannot give one. */
function usesFleetLock(state: CacheState, options: ResolvedOptions): boolean {
  if (!options.lock) return false;
  const { cache } = state;
  if (cache.tryAcquireFillLock !== undefined) return true;
  // A cache that has the member but answers `undefined` withdrew its lock (a Redis user refused
  // scripts) and has said why in a warning of its own: one is enough.
  if (!('tryAcquireFillLock' in cache)) warnNoLock(state);
  return false;
}

/**
 * Takes the fleet's fill lock or waits for the replica that holds it (`acquireOrWait`). With the
 * lock, looks at the cache once more (another replica may have filled between our miss and our
 * lock): the entry read with the lock attempt, or a read of its own on a cache that cannot do both.
 */
async function lockPhase(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  hint: WaitHint | undefined,
): Promise<LockPhaseResult> {
  const key = flight.key;
  const wait = hint?.early === true ? { ...hint, waited: () => flight.waited() } : hint;
  const got = await acquireOrWait(state, key, options, flight.controller.signal, wait);
  const lock = got.kind === 'lock' ? got.lock : undefined;
  // Given up means `flight.result` is set (see `Flight.result`).
  if (got.kind === 'aborted' || flight.result !== undefined) return stopped(state, key, lock);
  if (got.kind === 'yielded') {
    // An early refresh leaves the key to the replica holding the lock. The value it set out to
    // replace is still fresh, so no miss has joined the flight; it ends with that value.
    flight.detach();
    const previous = hint?.previous;
    flight.settle(previous === undefined ? answered(undefined, undefined) : answeredWith(previous));
    return stopped(state, key, undefined);
  }
  if (got.kind === 'value')
    return { kind: 'found', value: got.entry.value, createdAt: got.entry.createdAt, lock: undefined };
  if (lock === undefined) return FILL_WITHOUT_LOCK;
  // A cache that read the key with the lock attempt answered the double-check already.
  const entry =
    got.kind === 'lock' && got.read !== undefined ? got.read.entry : await readEntryAsync(state, key);
  if (flight.result !== undefined) return stopped(state, key, lock);
  if (entry !== undefined && Date.now() < entry.freshUntil && !staleFor(hint, entry))
    return { kind: 'found', value: entry.value, createdAt: entry.createdAt, lock };
  return { kind: 'fill', lock };
}

/**
 * True when `entry` is the very value an early refresh set out to replace (or an older one): fresh,
 * but not another replica's refresh.
 */
function staleFor(hint: WaitHint | undefined, entry: CacheEntry): boolean {
  return hint?.early === true && hint.previous !== undefined && entry.createdAt <= hint.previous.createdAt;
}

async function stopped(state: CacheState, key: string, lock: FillLock | undefined): Promise<LockPhaseResult> {
  state.counters.fillsCancelled++;
  if (lock !== undefined) await releaseLock(state, key, lock, 'failed');
  return { kind: 'stop' };
}

/**
 * Ends a fill that failed (it threw, or its result failed `checkValue`, counted by `counted`):
 * unless the flight was settled meanwhile (`fillTimeout`, every caller gone), its callers get
 * `error`, or with fail-safe the previous value the cache still confirms (then re-armed). Then
 * releases the lock as failed and waits for the re-arm's write.
 */
async function failFill(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  startedAt: number,
  error: unknown,
  release: (outcome: FillOutcome) => Promise<void>,
  counted?: () => void,
): Promise<void> {
  const { counters } = state;
  // With fail-safe the cache is read once more (callers arriving meanwhile join this flight).
  const confirmed =
    flight.fallback === undefined || flight.result !== undefined
      ? undefined
      : await confirmFallback(state, flight, options);
  const unanswered = flight.result === undefined;
  // Counted once: a reaped flight was counted as a timeout already (see `Flight.wasReaped`); a fill
  // whose callers all left (never a background one) failed all the same.
  if (unanswered ? !flight.wasReaped : abandoned(flight)) {
    counters.fillFailures++;
    if (flight.background) counters.backgroundRefreshFailures++;
    counted?.();
    fillEvent(state, flight, startedAt, 'error');
  }
  if (unanswered) {
    // The flight leaves the registry before the callers hear, so the next call retries from scratch
    // (or, after fail-safe's re-arm, hits the re-armed value).
    flight.detach();
    if (confirmed === undefined) flight.settle({ ok: false, kind: 'fill', error });
    else {
      flight.settle(answered(confirmed.entry.value, confirmed.stored.value));
      activate(state, flight, options, confirmed, 'error');
    }
  }
  await release('failed');
  // Without a lock there is nothing to wait for, but the re-arm's write is part of this work.
  if (flight.rearming !== undefined) await flight.rearming;
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
  const held = lock === undefined ? undefined : holdLock(state, flight, lock, options.lockTtl);
  const release = held === undefined ? releaseNothing : held.release;
  // `signal` is made when the fill first reads it: an AbortSignal costs an EventTarget (1-2 us, and
  // tens on a CPU cold after a pause, where a burst's first stale read starts the refresh), and most
  // fills never look at it. Aborting a controller whose signal nobody read still aborts it for a
  // later reader.
  const context: FillContext<unknown> = {
    key: flight.key,
    get signal() {
      return flight.controller.signal;
    },
    stale,
    background: flight.background,
  };
  counters.fills++;
  flight.fillStarted = true;
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
    await failFill(state, flight, options, startedAt, error, release);
    return;
  }
  // The fill's duration goes into the entry (`delta`): early refreshes and lock waiters time by it.
  // Taken before `checkValue` runs, so a slow (asynchronous) schema does not count as fill time.
  const delta = Math.max(0, Date.now() - startedAt);
  let checked: CheckResult | undefined;
  let cachedValue: unknown;
  if (options.check !== undefined && flight.result === undefined) {
    // What later hits will be checked against: the value as the cache gives it back.
    cachedValue = asCached(state, value);
    const result = options.check(cachedValue);
    checked = isThenable(result) ? await result : result;
    if (!checked.ok) {
      const { issues } = checked;
      // A result that fails the check is a failed fill: with fail-safe, the previous value answers.
      await failFill(state, flight, options, startedAt, fillCheckFailure(issues), release, () => {
        counters.checkValueFailures++;
        checkEvent(state, flight.key, 'fill', issues);
      });
      return;
    }
  }
  // A flight given up while its fill ran (fillTimeout, every caller gone) has answered its callers
  // already: its value is neither delivered nor written, and the lock is released as failed. Its
  // fill event was the timeout's; a fill whose callers all left still reports how it ended.
  const givenUp = flight.result !== undefined;
  if ((!givenUp || abandoned(flight)) && !flight.wasReaped) fillEvent(state, flight, startedAt, 'ok');
  const pending = deliverFilled(
    state,
    flight,
    value,
    options,
    startedAt,
    delta,
    checked?.ok ? { value: checked.value, stored: cachedValue } : undefined,
    held?.commit,
  );
  if (pending !== undefined) await pending;
  // After a commit this is a no-op: the commit released the lock.
  await release(givenUp ? 'failed' : 'filled');
}

const releaseNothing = async (_outcome: FillOutcome): Promise<void> => {};

/** Writes a fill's entry and releases the lock as `'filled'` in one step; never rejects. */
type Commit = (entry: CacheEntry, options: CacheSetOptions) => Promise<void>;

/** A held lock's two ways out: `release`, and `commit` when the lock can write too. */
interface HeldLock {
  readonly release: (outcome: FillOutcome) => Promise<void>;
  readonly commit: Commit | undefined;
}

/**
 * Keeps `lock` extended while the fill runs and returns its release, which acts once: when the fill
 * ends, or as soon as the flight is given up (fillTimeout, every caller gone) even if the fill itself
 * never returns, so the lock is not extended forever. Where the lock can commit (`FillLock.commit`),
 * also the commit of the fill's value, which counts as that one release.
 */
function holdLock(state: CacheState, flight: Flight, lock: FillLock, lockTtl: number): HeldLock {
  const key = flight.key;
  const stopExtending = keepLockAlive(state, key, lock, lockTtl);
  let released = false;
  const release = async (outcome: FillOutcome): Promise<void> => {
    if (released) return;
    released = true;
    stopExtending();
    // Fail-safe re-armed the value: waiters must find it once the lock is free, so it is written
    // first, and they are told a value is there.
    const rearming = flight.rearming;
    if (rearming !== undefined) {
      await rearming;
      return releaseLock(state, key, lock, 'filled');
    }
    return releaseLock(state, key, lock, outcome);
  };
  const { signal } = flight.controller;
  // Given up between the lock phase and now: nothing will abort again, so release at once.
  if (signal.aborted) void release('failed');
  else signal.addEventListener('abort', () => void release('failed'), { once: true });
  if (lock.commit === undefined) return { release, commit: undefined };
  const commit = async (entry: CacheEntry, options: CacheSetOptions): Promise<void> => {
    // Released already (given up meanwhile): the value is only written.
    if (released) return writeEntry(state, key, entry, options.ttl);
    released = true;
    stopExtending();
    return commitEntry(state, key, lock, entry, options, () => flight.detach());
  };
  return { release, commit };
}

function warnNoLock(state: CacheState): void {
  if (state.warnedNoLock) return;
  state.warnedNoLock = true;
  const message =
    `stampede: distributedFillLock was asked of cache '${state.name}', which has no tryAcquireFillLock; ` +
    'protection is in-process only (one fill per process, not per fleet).';
  reportWarning(state.name, message);
}
