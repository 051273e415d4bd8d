import { abortReason, onAbort } from './abort.js';
import { isPendingRead, isThenable, readEntry, sharedRead, shareRead } from './backend.js';
import { takeRefreshSlot } from './background.js';
import type { Cache, CacheEntry } from './cache.js';
import { checkedEntry, checkJoined, type ValueCheck } from './check-value.js';
import { COARSE_MARGIN_MS, coarseNow, stillBefore, wakeClockThread } from './clock.js';
import { type Duration, toMilliseconds } from './duration.js';
import { SETTLED } from './entry.js';
import { kindOf, messageOf } from './errors.js';
import { emit, hasListeners } from './events.js';
import { capturedFallback, takesEarlyAnswer } from './fail-safe.js';
import { execute, type FillFn, handOff, startBackgroundFlight, startForegroundFlight } from './fill.js';
import { insideFillOf, selfWaitError } from './fill-context.js';
import { type Flight, type StaleRead, staleReads } from './flight.js';
import { liveFlight, silentUnproven, timerTurn } from './isolated-flights.js';
import {
  type FillContext,
  type GetOrComputeOptions,
  holdsSame,
  type ResolvedOptions,
  rememberedFor,
  resolveOptionsOnce,
  ttlOnly,
} from './options.js';
import { type CacheState, STATE, type Stateful, stateOf } from './registry.js';
import { CHANGES_KEY, shared } from './shared.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import { reportWarning } from './stats.js';

/** Checks the arguments every entry point shares; throws TypeError naming the argument. */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new TypeError(`key must be a string; got ${kindOf(key)}`);
  if (key.length === 0) throw new TypeError('key must be a non-empty string');
}

function checkFill(fill: unknown): asserts fill is FillFn {
  if (typeof fill !== 'function') throw new TypeError(`fill must be a function; got ${kindOf(fill)}`);
}

/**
 * Read-through with single-flight: returns the cached value for `key` if fresh, otherwise runs
 * `fill` once for every concurrent caller of this key on this cache in this process, caches its
 * result for `ttl` and gives it to all of them.
 *
 * A fill that throws rejects with {@link CacheFillError} (kind `'fill'` for the caller that ran it,
 * `'fill_failed'` for callers that coalesced onto it) and caches nothing. `undefined` from a fill is
 * returned but not cached; `null` is cached.
 *
 * @param cache - any {@link Cache} (`createMemoryCache`, `createRedisCache`, ...)
 * @param key - a non-empty string
 * @param ttl - how long the value is fresh; `undefined` never expires
 * @param fill - computes the value on a miss
 * @example
 * const count = await getOrCompute(cache, 'bookmark_count', '30s', () => countBookmarksInDb());
 */
export function getOrCompute<T>(
  cache: Cache,
  key: string,
  ttl: Duration | undefined,
  fill: () => T | Promise<T>,
): Promise<T> {
  // The hit path: a known cache, a plain key, a function, a ttl seen before, nothing in flight and
  // a synchronous adapter: one read and one look at the clock: the coarse one when the entry is far
  // from expiry by it, else the real one. (A clock cached until a timer clears it can be
  // arbitrarily old when the caller never yields to timers; the coarse clock's thread cannot be
  // held up by the caller, see clock.ts.)
  const state = cache == null ? undefined : (cache as Stateful)[STATE];
  if (
    state === undefined ||
    typeof key !== 'string' ||
    key.length === 0 ||
    typeof fill !== 'function' ||
    !(ttl === undefined || ttl === lastTtl || isPlainMs(ttl)) ||
    state.flights.size !== 0 ||
    state.reads.size !== 0
  ) {
    return slowGetOrCompute(state, cache, key, ttl, fill);
  }
  // A tiered cache: a fresh L1 copy is answered from L1 directly, as the tiered cache's own `get`
  // would (counted an L1 hit); anything else goes through that `get` below.
  if (state.localTier !== undefined) {
    const hit = localTierHit(state, state.localTier, key);
    if (hit !== undefined) return hit as Promise<T>;
  }
  const read = readEntry(state, key);
  if (read !== undefined && !isPendingRead(read)) {
    const freshUntil = read.freshUntil;
    if (freshUntil === Number.POSITIVE_INFINITY || stillBefore(freshUntil)) {
      state.counters.hits++;
      return settledPromise(read) as Promise<T>;
    }
  }
  const options = ttlOnly(ttl === undefined ? undefined : toMilliseconds(ttl, 'ttl'));
  if (read === undefined || !isPendingRead(read))
    return afterRead(state, key, read, options, fill as FillFn) as Promise<T>;
  return afterPendingRead(state, key, shareRead(state, key, read), options, fill as FillFn) as Promise<T>;
}

/**
 * {@link afterRead} once `read` settles. Kept apart from the entry points: a function that creates
 * a closure allocates the variables it captures on every call, whichever branch runs, and a hit or
 * a stale read creates none.
 */
function afterPendingRead(
  state: CacheState,
  key: string,
  read: Promise<CacheEntry | undefined>,
  options: ResolvedOptions,
  fill: FillFn,
): Promise<unknown> {
  return read.then((entry) => afterRead(state, key, entry, options, fill));
}

/**
 * A fresh L1 copy of a tiered cache, as its settled promise (counted an L1 hit), or `undefined`: no
 * copy, a stale one, a pending read or a fault (the tiered cache's own `get`, called next, reports
 * it). Kept apart from {@link getOrCompute} so that each stays small enough to be inlined into.
 */
function localTierHit(state: CacheState, tier: Cache, key: string): Promise<unknown> | undefined {
  let copy: ReturnType<Cache['get']>;
  try {
    copy = tier.get(key);
  } catch {
    return undefined;
  }
  if (copy === undefined) return undefined;
  const freshUntil = (copy as CacheEntry).freshUntil;
  if (typeof freshUntil !== 'number') {
    if (isPendingRead(copy)) {
      // An L1 that answers asynchronously has no fast path: from now on the tiered cache's own
      // `get` alone reads it (each call read it twice). This read's answer is nobody's.
      state.localTier = undefined;
      copy.then(undefined, () => {});
    }
    return undefined;
  }
  if (!stillBefore(freshUntil)) return undefined;
  state.counters.l1Hits++;
  state.counters.hits++;
  return settledPromise(copy as CacheEntry);
}

// A hit hands out a promise already resolved with the entry's value, made once per entry and kept
// on it (a non-enumerable symbol property, whose room createEntry makes; an entry built otherwise
// gets it at its first hit): every later hit of that entry returns the same promise, which costs
// less than a new one, and awaiting a native promise allocates nothing more.
function settledPromise(entry: CacheEntry): Promise<unknown> {
  // Read first, on every hit: the first hit of a new entry then finds the optimized code ready for it.
  const value = entry.value;
  const known = (entry as CacheEntry & { [SETTLED]?: Promise<unknown> })[SETTLED];
  if (known !== undefined) return known;
  const promise = Promise.resolve(value);
  // A frozen or sealed entry keeps no promise: each of its hits makes one.
  if (!Object.isExtensible(entry)) return promise;
  if (SETTLED in entry) (entry as CacheEntry & { [SETTLED]?: Promise<unknown> })[SETTLED] = promise;
  else Object.defineProperty(entry, SETTLED, { value: promise, enumerable: false, writable: false });
  return promise;
}

// The last string ttl that parsed: a call with the same literal skips the parser.
let lastTtl: Duration | undefined;

function isPlainMs(ttl: Duration): boolean {
  return typeof ttl === 'number' && ttl >= 0 && ttl !== Number.POSITIVE_INFINITY;
}

/**
 * Reads `key` (checked by `checkValue`, if any) and answers as {@link afterRead} does; a caller with
 * a `signal` leaves a read still in flight when it aborts.
 */
function readAndAnswer(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  fill: FillFn,
): Promise<unknown> {
  const shared = sharedRead(state, key);
  const check = options.check;
  const read = check === undefined ? shared : checkedRead(state, key, shared, check);
  if (read === undefined || !isPendingRead(read)) return afterRead(state, key, read, options, fill);
  const answer = afterPendingRead(state, key, read, options, fill);
  const signal = options.signal;
  return signal === undefined ? answer : untilAborted(answer, signal);
}

/** {@link getOrCompute} for every call the hit path does not take: checks, coalescing, shared reads. */
function slowGetOrCompute<T>(
  known: CacheState | undefined,
  cache: Cache,
  key: string,
  ttl: Duration | undefined,
  fill: () => T | Promise<T>,
): Promise<T> {
  let state: CacheState;
  let ttlMs: number | undefined;
  try {
    checkKey(key);
    checkFill(fill);
    ttlMs = ttl === undefined ? undefined : toMilliseconds(ttl, 'ttl');
    if (typeof ttl === 'string') lastTtl = ttl;
    state = known ?? stateOf(cache);
  } catch (error) {
    return Promise.reject(error);
  }
  if (state.flights.size !== 0) {
    const flight = foregroundFlight(state, key, undefined);
    if (flight !== undefined) return coalesce(state, flight, ttlOnly(ttlMs)) as Promise<T>;
  }
  const read = sharedRead(state, key);
  if (read === undefined || !isPendingRead(read)) {
    return afterRead(state, key, read, ttlOnly(ttlMs), fill as FillFn) as Promise<T>;
  }
  return afterPendingRead(state, key, read, ttlOnly(ttlMs), fill as FillFn) as Promise<T>;
}

/**
 * {@link getOrCompute} with every option: stale-while-revalidate, the distributed fill lock, abort
 * signals, a fill timeout, tags and `checkValue`. The fill receives a {@link FillContext} (key,
 * signal, last value); it may run in the background after the caller has its (stale) answer.
 *
 * With a Standard Schema as `checkValue`, the result's type is the schema's output type, and the
 * fill must return the schema's input type.
 *
 * @example
 * const count = await getOrComputeWith(cache, 'bookmark_count',
 *   { ttl: '30s', staleWhileRevalidate: '5m', distributedFillLock: true },
 *   ({ signal }) => countBookmarksInDb({ signal }));
 * @example
 * const user = await getOrComputeWith(cache, `user:${id}`,
 *   { ttl: '5m', tags: [`user:${id}`], checkValue: z.object({ id: z.string(), name: z.string() }) },
 *   () => loadUser(id)); // typed { id: string; name: string }; an old-shape entry is a miss
 */
export function getOrComputeWith<S extends StandardSchemaV1>(
  cache: Cache,
  key: string,
  options: GetOrComputeOptions & { readonly checkValue: S },
  fill: (
    context: FillContext<StandardSchemaV1.InferOutput<S>>,
  ) => StandardSchemaV1.InferInput<S> | Promise<StandardSchemaV1.InferInput<S>>,
): Promise<StandardSchemaV1.InferOutput<S>>;
export function getOrComputeWith<T>(
  cache: Cache,
  key: string,
  options: GetOrComputeOptions,
  fill: (context: FillContext) => T | Promise<T>,
): Promise<T>;
export function getOrComputeWith<T>(
  cache: Cache,
  key: string,
  options: GetOrComputeOptions,
  fill: (context: FillContext) => T | Promise<T>,
): Promise<T> {
  // A burst of stale reads during a refresh: answered from the burst's first read while nothing
  // that read depends on has changed (see staleAgain), the latest note here, the key's own in
  // computeWith. Kept apart from the rest, in a function small enough for V8 to optimize again at
  // its first profiler tick: the burst's first reads take paths the hits before them never did, the
  // optimized code of this function was thrown away there, and the whole of it, which the burst's
  // later calls leave after a few lines, was not optimized again in 40,000 calls (%GetOptimizationStatus).
  const last = staleReads.last;
  if (last !== undefined && last.key === key && last.cache === cache) {
    const again = staleAgain(last, options, fill);
    if (again !== undefined) return again as Promise<T>;
  }
  return computeWith(cache, key, options, fill);
}

/**
 * {@link getOrComputeWith} past the latest note. When the key's own note is that latest note, which
 * has just failed to answer, it is checked once more before the full read: telling this function
 * which note was tried makes the front 81 bytes of bytecode, one over what V8 optimizes at the
 * first profiler tick (--trace-opt-verbose: "too large for small function optimization: 81/81").
 */
function computeWith<T>(
  cache: Cache,
  key: string,
  options: GetOrComputeOptions,
  fill: (context: FillContext) => T | Promise<T>,
): Promise<T> {
  const known = cache == null ? undefined : (cache as Stateful)[STATE];
  if (known !== undefined && known.flights.size !== 0) {
    const noted = known.flights.get(key)?.staleRead;
    if (noted !== undefined) {
      const again = staleAgain(noted, options, fill);
      if (again !== undefined) return again as Promise<T>;
    }
  }
  let state: CacheState;
  let resolved: ResolvedOptions;
  try {
    checkKey(key);
    resolved = resolveOptionsOnce(options);
    checkFill(fill);
    state = known ?? stateOf(cache);
  } catch (error) {
    return Promise.reject(error);
  }
  const signal = resolved.signal;
  if (signal?.aborted) {
    state.counters.abortedReads++;
    return Promise.reject(abortReason(signal));
  }
  // `grace` first: read on every call, it has type feedback by the time the hit path is optimized,
  // so the first call made while a fill is in flight does not throw that code away (a deopt, then
  // some thousands of calls in slower code: measured at a key's first expiry after warm-up).
  if (resolved.grace === 0 && state.flights.size !== 0) {
    const flight = foregroundFlight(state, key, resolved.check);
    if (flight !== undefined) return coalesce(state, flight, resolved) as Promise<T>;
  }
  return readAndAnswer(state, key, resolved, fill as FillFn) as Promise<T>;
}

/**
 * The answer of a stale read made during the key's refresh, given again without reading the cache:
 * `undefined` unless the key's fill in flight has a {@link Flight.staleRead} made with this very
 * options object, which still holds what it held then (every field, and no other), the fill has no
 * value yet, the adapter's change count has not moved since that read (no write, delete, clear or
 * tag invalidation: see `CHANGES_KEY`), and the entry is still stale and within its grace, judged
 * by the clocks {@link afterRead} uses. The full path would then read that same entry and serve it
 * stale, so this answers as it would (the same settled promise, counted a stale hit) without the
 * options' validation and the cache read. A burst of reads during a refresh is where this counts:
 * its last caller waits for every call before it.
 */
function staleAgain(
  noted: StaleRead,
  options: GetOrComputeOptions,
  fill: unknown,
): Promise<unknown> | undefined {
  // Another options object reads the cache; a call without a fill function is refused there.
  if (noted.source !== options || typeof fill !== 'function') return undefined;
  if (
    // Still the refresh's note (a flight superseded before its value leaves the registry, and
    // drops it), the fill still without a value, the adapter unchanged, the options too.
    noted.flight.staleRead !== noted ||
    noted.flight.result !== undefined ||
    noted.changes !== (noted.cache as Counted)[CHANGES_KEY] ||
    !holdsSame(noted.source, noted.snapshot)
  ) {
    return forget(noted);
  }
  // As afterRead judges it: by the coarse clock far from the end of the grace (the entry was stale
  // by the real clock when noted, and stays so), else by the real clock.
  const entry = noted.entry;
  const coarse = coarseNow();
  if (coarse === Number.POSITIVE_INFINITY || !(entry.staleUntil - coarse > COARSE_MARGIN_MS)) {
    const now = Date.now();
    if (!(now >= entry.freshUntil && now < entry.staleUntil)) return forget(noted);
  }
  noted.counters.staleHits++;
  return noted.answer;
}

/** Lets go of a note that no longer answers (the calls that follow skip it), for staleAgain. */
function forget(noted: StaleRead): undefined {
  if (staleReads.last === noted) staleReads.last = undefined;
  return undefined;
}

/** A cache that may keep a change count (see `CHANGES_KEY`). */
type Counted = Cache & { readonly [CHANGES_KEY]?: number };

/**
 * Notes on `flight` (a fill of the key in flight, without a value yet) the stale read of `entry` just
 * served with `options`, for {@link staleAgain}: only for a caller's own options object without
 * `signal` or `checkValue`, an adapter that keeps a change count, and not on an isolated runtime
 * (there a stale read may have to look at a silent refresh, see isolated-flights.ts).
 */
function noteStaleRead(state: CacheState, flight: Flight, entry: CacheEntry, options: ResolvedOptions): void {
  const source = options.source;
  if (source === undefined || options.signal !== undefined || options.check !== undefined) return;
  if (flight.heartbeat !== undefined) return;
  const changes = (state.cache as Counted)[CHANGES_KEY];
  if (typeof changes !== 'number') return;
  // What the call just checked its options object against (it was resolved last).
  const snapshot = rememberedFor(options);
  if (snapshot === undefined) return;
  // Noted again in place: a refresh whose key is read between other keys' calls (each moves the
  // count) allocates nothing per stale read.
  // Only an entry that keeps its settled promise: a read of a frozen one makes a new promise each
  // time, and so must the calls answered from it.
  const answer = settledPromise(entry);
  if ((entry as CacheEntry & { [SETTLED]?: Promise<unknown> })[SETTLED] !== answer) return;
  const known = flight.staleRead;
  if (known !== undefined) {
    known.entry = entry;
    known.answer = answer;
    known.source = source;
    known.snapshot = snapshot;
    known.changes = changes;
    staleReads.last = known;
    return;
  }
  const noted: StaleRead = {
    flight,
    key: flight.key,
    cache: state.cache,
    counters: state.counters,
    entry,
    answer,
    source,
    snapshot,
    changes,
  };
  flight.staleRead = noted;
  staleReads.last = noted;
}

/**
 * The key's foreground fill in flight that a call without grace joins before reading: not a
 * background refresh (its key still holds a servable value), nor one past its soft timeout (whether
 * its previous value may still answer is for the read to show), nor, on an isolated runtime, a
 * flight silent without proof that its request is alive (the read decides, see {@link afterRead}).
 * Not one that a check's refusal of the value read started, unless this call has that same
 * `checkValue`: for a caller with another check (or none) that value may be a hit.
 */
function foregroundFlight(state: CacheState, key: string, check: ValueCheck | undefined): Flight | undefined {
  const flight = liveFlight(state.flights, key);
  return flight !== undefined &&
    !flight.background &&
    flight.early === undefined &&
    (flight.check === check || !flight.afterRefusal) &&
    joinable(flight) &&
    !silentUnproven(flight)
    ? flight
    : undefined;
}

/**
 * Whether a caller may join `flight`: not once the value it delivered is past its freshness (a
 * settled flight stays registered until its write lands, however short the ttl).
 */
function joinable(flight: Flight): boolean {
  // Infinite until the flight delivers a value (a background refresh too, whose write is pending).
  return Date.now() < flight.freshUntil;
}

/** {@link checkedEntry} of a read that may still be pending. */
function checkedRead(
  state: CacheState,
  key: string,
  read: CacheEntry | undefined | Promise<CacheEntry | undefined>,
  check: ValueCheck,
): CacheEntry | undefined | Promise<CacheEntry | undefined> {
  return isPendingRead(read)
    ? read.then((entry) => refusalNoted(state, key, entry, checkedEntry(state, key, entry, check)))
    : refusalNoted(state, key, read, checkedEntry(state, key, read, check));
}

/** `checked`, noting in `state.refusedReads` when the check refused the `entry` a read found. */
function refusalNoted(
  state: CacheState,
  key: string,
  entry: CacheEntry | undefined,
  checked: CacheEntry | undefined | Promise<CacheEntry | undefined>,
): CacheEntry | undefined | Promise<CacheEntry | undefined> {
  if (entry === undefined) return checked;
  const note = (passed: CacheEntry | undefined): CacheEntry | undefined => {
    if (passed === undefined) {
      state.refusedReads ??= new Set();
      state.refusedReads.add(key);
    }
    return passed;
  };
  return isThenable<CacheEntry | undefined>(checked)
    ? Promise.resolve(checked).then(note)
    : note(checked as CacheEntry | undefined);
}

/** `promise`, unless `signal` aborts first (a caller leaving while its read is still in flight). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const stop = onAbort(signal, () => reject(abortReason(signal)));
    promise.then(
      (value) => {
        stop();
        resolve(value);
      },
      (error: unknown) => {
        stop();
        reject(error);
      },
    );
  });
}

/**
 * Joins a fill in flight (a miss that coalesces). This caller's own signal and `fillTimeout` still
 * apply: it may leave a fill that someone else started with other limits (or none).
 */
function coalesce(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  found?: CacheEntry,
): Promise<unknown> {
  const { counters } = state;
  counters.misses++;
  counters.coalescedWaits++;
  // Only while the fill function runs with a tracked async context (Node): a call from inside it
  // would wait for its own result forever.
  if (flight.frame !== undefined && !flight.frame.done && insideFillOf(flight)) {
    return Promise.reject(selfWaitError(state.name, flight.key));
  }
  // Past its soft timeout, the previous value answers a new caller only when this caller's read has
  // just found that very entry (another replica may have deleted or replaced it meanwhile, unheard).
  const takesEarly =
    found !== undefined &&
    found.createdAt === flight.early?.entry?.createdAt &&
    takesEarlyAnswer(flight, options);
  return joinChecked(state, flight, options, takesEarly);
}

/** Waits for `flight` and answers with its value as this caller's own `checkValue` gives it. */
function joinChecked(
  state: CacheState,
  flight: Flight,
  options: ResolvedOptions,
  takesEarly: boolean,
): Promise<unknown> {
  const check = options.check;
  if (check === flight.check) return flight.join(options.signal, options.fillTimeout, takesEarly);
  // Another check (or none) than the call that started the fill: this caller's own check runs on
  // the value as the cache holds it, so it gets what its own hit of that value would give.
  const joined =
    typeof flight.joinStored === 'function'
      ? flight.joinStored(options.signal, options.fillTimeout, takesEarly)
      : flight.join(options.signal, options.fillTimeout, takesEarly);
  return joined.then((stored) => checkJoined(state, flight.key, stored, check));
}

/**
 * Whether `flight` is a finished refresh of `entry` whose write has not landed yet: its fresh value
 * answers a caller with grace instead of `entry`, as it answers one without (see `fill.ts`
 * deliverFilled). Only a value not older than `entry` (another replica may have written a newer one),
 * and only for a caller with the fill's own `checkValue` (another check may refuse the new value
 * where the stale one passes: that caller keeps its stale hit).
 */
function refreshedOver(flight: Flight, entry: CacheEntry, check: ValueCheck | undefined): boolean {
  return (
    flight.result !== undefined &&
    flight.check === check &&
    flight.startedAt >= entry.createdAt &&
    joinable(flight)
  );
}

/** What a read means: fresh, stale (serve and refresh), or a miss (join or start a fill). */
function afterRead(
  state: CacheState,
  key: string,
  entry: CacheEntry | undefined,
  options: ResolvedOptions,
  fill: FillFn,
): Promise<unknown> {
  const { counters } = state;
  // A caller that left while its read was in flight has its answer (the rejection) already; it must
  // not start a fill nobody waits for. It is neither a hit nor a miss.
  if (options.signal?.aborted) {
    counters.abortedReads++;
    return Promise.reject(abortReason(options.signal));
  }
  if (entry !== undefined) {
    // The coarse clock (while its thread runs) answers for an entry far from expiry, or stale and
    // far from the end of its grace; near either edge, and without the thread, the real clock does.
    // The coarse time is at most the margin behind the real one, so the time left lies between
    // `left - COARSE_MARGIN_MS` and `left`. Without the thread no arithmetic is done on it: until
    // this function is optimized, each intermediate time is a heap number allocated per call.
    const freshUntil = entry.freshUntil;
    const coarse = coarseNow();
    // NaN until a clock decides (a number throughout, so the compiled code keeps it unboxed).
    let now = Number.NaN;
    if (coarse !== Number.POSITIVE_INFINITY) {
      const left = freshUntil - coarse;
      if (left > COARSE_MARGIN_MS) {
        counters.hits++;
        if (options.earlyRefresh !== 0)
          mayRefreshEarly(state, key, entry, left - COARSE_MARGIN_MS, left, options, fill);
        return settledPromise(entry);
      }
      if (entry.staleUntil - coarse > COARSE_MARGIN_MS) {
        if (coarse >= freshUntil) now = coarse;
        else if (options.grace > 0 && state.flights.size !== 0) {
          // Whole seconds seldom show an entry stale in the first moments after its expiry, when
          // a burst reads it during its refresh; a fill of the key that started at or after its
          // `freshUntil` shows it (that start is a reading of the real clock, and the time only
          // moves on), and it is the refresh a stale read would otherwise start.
          const flight = state.flights.get(key);
          if (flight !== undefined && flight.startedAt >= freshUntil) {
            if (refreshedOver(flight, entry, options.check)) {
              counters.hits++;
              return joinChecked(state, flight, options, false);
            }
            counters.staleHits++;
            noteStaleRead(state, flight, entry, options);
            return settledPromise(entry);
          }
        }
      }
    }
    if (Number.isNaN(now)) now = Date.now();
    if (now < freshUntil) {
      counters.hits++;
      if (options.earlyRefresh !== 0) {
        const remaining = freshUntil - now;
        mayRefreshEarly(state, key, entry, remaining, remaining, options, fill);
      }
      return settledPromise(entry);
    }
    if (options.grace > 0 && now < entry.staleUntil) {
      const running = liveFlight(state.flights, key);
      if (running !== undefined && refreshedOver(running, entry, options.check)) {
        counters.hits++;
        return joinChecked(state, running, options, false);
      }
      counters.staleHits++;
      if (running === undefined) refreshInBackground(state, key, options, fill, entry);
      // A refresh silent without proof (isolated runtimes): a timer turn tells a later read.
      else if (silentUnproven(running)) void timerTurn(running);
      else noteStaleRead(state, running, entry, options);
      // The same settled promise as a fresh hit of this entry: a burst of stale reads during a
      // refresh allocates nothing per read.
      return settledPromise(entry);
    }
  }
  // Taken whichever way this miss goes, so the set holds only keys whose refusal is still pending.
  const refused = state.refusedReads !== undefined && state.refusedReads.delete(key);
  const inFlight = liveFlight(state.flights, key, true);
  if (inFlight !== undefined && joinable(inFlight)) {
    // Isolated runtimes: a flight silent without proof that its request is gone (the isolate may
    // have been busy) is neither joined nor doubled: after a timer turn a live one has beaten, and a
    // gone one is given up, and this call reads again.
    if (silentUnproven(inFlight))
      return timerTurn(inFlight).then(() => readAndAnswer(state, key, options, fill));
    return coalesce(state, inFlight, options, entry);
  }
  counters.misses++;
  // With fail-safe, an expired entry the read still found is what a failing fill falls back on.
  const fallback = options.failSafe === undefined ? undefined : capturedFallback(entry, options);
  const flight = startForegroundFlight(state, key, options, fallback);
  if (refused && options.check !== undefined) flight.afterRefusal = true;
  // The leader joins before `execute` calls the fill (synchronously, without the lock): a caller
  // that joins and leaves from inside the fill must not find the flight without callers.
  const answer = flight.joinAsLeader(options.signal, options.fillTimeout);
  // The write and the lock release finish after the callers have their value: on platforms that
  // freeze work left after the response, they need the request's waitUntil.
  handOff(
    state,
    options,
    execute(state, flight, options, fill, entry?.value, { previous: entry, early: false }),
  );
  return answer;
}

/** Starts one stale-while-revalidate refresh, within the process-wide cap. */
function refreshInBackground(
  state: CacheState,
  key: string,
  options: ResolvedOptions,
  fill: FillFn,
  stale: CacheEntry,
): void {
  if (!takeRefreshSlot()) {
    state.counters.backgroundRefreshesSkipped++;
    if (hasListeners()) emit({ type: 'refresh-skipped', cache: state.name, key });
    return;
  }
  state.counters.backgroundRefreshes++;
  // Until the refresh lands, the key's readers read it stale: the coarse clock spares each of them a
  // clock reading (see afterRead).
  wakeClockThread();
  const fallback = options.failSafe === undefined ? undefined : capturedFallback(stale, options);
  const flight = startBackgroundFlight(state, key, options, fallback);
  handOff(
    state,
    options,
    execute(state, flight, options, fill, stale.value, { previous: stale, early: false }),
  );
}

// The smallest draw taken: `-ln(2^-53)`, some 36.7, bounds the head start at that many `delta * beta`.
// `Math.random` returns multiples of 2^-53 or coarser, so only a draw of exactly 0 is raised.
const MIN_DRAW = 2 ** -53;
const MAX_HEAD_START = -Math.log(MIN_DRAW);

/**
 * XFetch on a fresh hit: nothing but a comparison until expiry is within reach of the largest
 * possible draw, then one random draw (and, for draws near the threshold, a logarithm); only for
 * entries whose fill time is known. The time left is known to lie in `[least, most]` (exactly, when
 * they are equal); the real clock is read only for a draw that falls between them.
 */
function mayRefreshEarly(
  state: CacheState,
  key: string,
  entry: CacheEntry,
  least: number,
  most: number,
  options: ResolvedOptions,
  fill: FillFn,
): void {
  const delta = entry.delta;
  if (delta === undefined) return;
  const scale = delta * options.earlyRefresh;
  if (least > scale * MAX_HEAD_START || !drawsEarlyRefresh(state, least, most, scale, entry.freshUntil))
    return;
  refreshEarly(state, key, entry, delta, Math.max(0, entry.freshUntil - Date.now()), options, fill);
}

/**
 * The XFetch test for a fresh entry whose time left lies in `[least, most]`, with `scale` =
 * `delta * beta`: `now - delta * beta * ln(random()) >= freshUntil`, that is
 * `-scale * ln(random()) >= remaining`, a draw below 2^-53 taken as 2^-53. `-ln(random())` is
 * exponentially distributed (mean 1): one read `t` ms from expiry draws a refresh with probability
 * `exp(-t / scale)`, so among `R` reads per ms the first draw comes typically
 * `scale * ln(R * scale / ln 2)` before expiry (the median of a Gumbel law; the core README's
 * "Choosing beta" works it through). One draw per call, whatever the bounds: a draw that lands
 * between them is settled by the real clock, never by drawing again. Kept apart from
 * {@link refreshEarly} so that the hit path inlines only this.
 */
function drawsEarlyRefresh(
  state: CacheState,
  least: number,
  most: number,
  scale: number,
  freshUntil: number,
): boolean {
  const drawn = draw(state);
  const r = Math.max(drawn, MIN_DRAW);
  // -ln(r) lies between 1 - r and 1/r - 1: where both bounds give the same answer (most draws), the
  // logarithm, the dearest part of the test, is not needed.
  const low = scale * (1 - r);
  if (low >= most) return true;
  if (low < least * r) return false;
  const threshold = -scale * Math.log(r);
  if (threshold >= most) return true;
  if (threshold < least) return false;
  return threshold >= freshUntil - Date.now();
}

// Caches whose hits met a random source that throws, warned of once each.
const warnedRandom = new WeakSet<CacheState>();

/**
 * One draw of `configure({ random })`. A source that throws costs the hit nothing: the draw counts
 * as 1 (no early refresh), with one warning per cache.
 */
function draw(state: CacheState): number {
  const random = shared.random ?? Math.random;
  let drawn: unknown;
  try {
    drawn = random();
  } catch (error) {
    return badDraw(state, `threw (${messageOf(error)})`);
  }
  // Outside [0, 1) (a source scaled to another range, or NaN) the law is meaningless: 2 would never
  // refresh, a negative draw always.
  if (typeof drawn === 'number' && drawn >= 0 && drawn < 1) return drawn;
  return badDraw(
    state,
    `returned ${typeof drawn === 'number' ? String(drawn) : kindOf(drawn)}, not a number in [0, 1)`,
  );
}

/** A draw that counts as 1 (no early refresh), with one warning per cache. */
function badDraw(state: CacheState, what: string): number {
  if (warnedRandom.has(state)) return 1;
  warnedRandom.add(state);
  reportWarning(
    state.name,
    `stampede: the random source given to configure({ random }) ${what}; earlyRefresh draws no refresh while it does`,
  );
  return 1;
}

/**
 * Starts the refresh an XFetch draw asked for: the same background flight as stale-while-revalidate's,
 * one per key per process (none while any flight of the key runs), within the process-wide cap,
 * under the lock when asked for.
 */
function refreshEarly(
  state: CacheState,
  key: string,
  entry: CacheEntry,
  delta: number,
  remaining: number,
  options: ResolvedOptions,
  fill: FillFn,
): void {
  const running = liveFlight(state.flights, key);
  if (running !== undefined) {
    if (silentUnproven(running)) void timerTurn(running);
    return;
  }
  const { counters } = state;
  if (!takeRefreshSlot()) {
    counters.earlyRefreshesSkipped++;
    if (hasListeners()) emit({ type: 'refresh-skipped', cache: state.name, key, early: true });
    return;
  }
  counters.earlyRefreshes++;
  if (hasListeners()) {
    emit({ type: 'early-refresh', cache: state.name, key, remainingMs: remaining, deltaMs: delta });
  }
  const fallback = options.failSafe === undefined ? undefined : capturedFallback(entry, options);
  const flight = startBackgroundFlight(state, key, options, fallback);
  handOff(
    state,
    options,
    execute(state, flight, options, fill, entry.value, { previous: entry, early: true }),
  );
}
