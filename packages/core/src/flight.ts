import { abortReason, onAbort } from './abort.js';
import type { CacheEntry } from './cache.js';
import { storedEntryOf, type ValueCheck } from './check-value.js';
import { CacheFillError, messageOf } from './errors.js';
import type { Fallback } from './fail-safe.js';
import { HEARTBEAT_MS, SILENT_FLIGHT_MS } from './isolated-flights.js';
import type { GetOrComputeOptions, Remembered } from './options.js';
import { type FillFrame, invalidations, isolatedRequests } from './shared.js';
import { type LongTimeout, setLongTimeout } from './timers.js';

/**
 * How a fill ended for its callers. A value that a `checkValue` (the flight's `check`) turned into
 * its output carries the value as the cache holds it in `stored`; without `stored` the two are the same.
 */
export type FlightResult =
  | { readonly ok: true; readonly value: unknown; readonly stored?: unknown }
  | { readonly ok: false; readonly kind: 'fill' | 'timeout' | 'abandoned'; readonly error: unknown };

/**
 * A {@link FlightResult} that answers with `value`, which the flight's `check` made from `stored`
 * (the value as the cache holds it; the same value when nothing changed it).
 */
export function answered(value: unknown, stored: unknown): FlightResult {
  return Object.is(value, stored) ? { ok: true, value } : { ok: true, value, stored };
}

/** A {@link FlightResult} that answers with `entry`'s value, read and checked by the flight's options. */
export function answeredWith(entry: CacheEntry): FlightResult {
  return answered(entry.value, storedEntryOf(entry).value);
}

/** The value of a successful `result` as the cache holds it. */
function storedOf(result: Extract<FlightResult, { ok: true }>): unknown {
  return 'stored' in result ? result.stored : result.value;
}

/** A {@link FlightResult} that is a failure. */
export type Failure = Exclude<FlightResult, { ok: true }>;

/** What answers a flight's callers instead of its timeout (fail-safe), and what to do if it does. */
export interface Rescue {
  /** The result the callers get instead of the timeout. */
  readonly answer: FlightResult;
  /** Called once the callers have the answer (not when the flight had settled meanwhile). */
  activate(): void;
}

// A caller that watches a flight from its own request context (`isolatedRequests`) looks after
// WATCH_FIRST_MS, then at doubling intervals up to WATCH_CEILING_MS.
const WATCH_FIRST_MS = 1;
const WATCH_CEILING_MS = 10;
// A watched flight still unsettled this long after its own deadline was started by a request whose
// context is gone (its fillTimeout timer, which lived there, never fired): the watcher gives it up.
const DEAD_FLIGHT_MS = 1_000;

/** The caller that started a foreground fill, or one that joined it. */
type Role = 'leader' | 'joiner';

interface Deferred {
  readonly promise: Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

function deferred(): Deferred {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<unknown>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * A stale read a refresh's later readers may be answered from (see {@link Flight.staleRead}); the
 * latest read of its key that could be noted, updated in place.
 */
export interface StaleRead {
  /** The flight it was noted on, its key and the cache (the adapter object), and that cache's state. */
  readonly flight: Flight;
  readonly key: string;
  readonly cache: object;
  readonly counters: { staleHits: number };
  /** The stale entry served, and the settled promise every read of it is answered with. */
  entry: CacheEntry;
  answer: Promise<unknown>;
  /** The caller's options object, and what it held then. */
  source: GetOrComputeOptions;
  snapshot: Remembered;
  /** The adapter's change count just after the entry was read. */
  changes: number;
}

/**
 * The stale read noted last (`get-or-compute.ts`, noteStaleRead): a burst's calls find it without
 * a lookup. Cleared when its flight leaves the registry, so that it keeps no cache or entry alive.
 */
export const staleReads: { last: StaleRead | undefined } = { last: undefined };
// The slot is empty until a refresh is first read stale. Left so, V8 compiles the functions that
// read it for a slot that is always `undefined`, and the first note throws their optimized code
// away: `getOrComputeWith` then stayed in unoptimized code for 40,000 calls after a key's first
// stale burst (%GetOptimizationStatus), each stale read of the bursts that followed costing twice
// as much. Two objects of different shapes written now make the slot's type general from the start.
staleReads.last = {} as StaleRead;
staleReads.last = [] as unknown as StaleRead;
staleReads.last = undefined;

/** How a {@link Flight} is set up. */
export interface FlightOptions {
  /** The key being filled. */
  readonly key: string;
  /** A stale-while-revalidate refresh (no caller waits for it) rather than a fill callers wait for. */
  readonly background: boolean;
  /** The flights of the key's cache, by key: the flight enters it at once and leaves through `detach`. */
  readonly registry: Map<string, Flight>;
  /** The flight's `fillTimeout` (ms), if any. */
  readonly fillTimeout: number | undefined;
  /** Called once the `fillTimeout` has given the flight up, after its callers have heard. */
  readonly onTimeout: (flight: Flight) => void;
  /** Called once when the flight settles, however it settles. */
  readonly onSettle?: ((flight: Flight) => void) | undefined;
  /** The previous value fail-safe may answer with (`failSafe`), if there is one. */
  readonly fallback?: Fallback | undefined;
  /**
   * Called when `fillTimeout` passes, before the callers hear: what to answer them with instead of
   * the timeout (fail-safe's previous value), or `undefined`. When it answers with a promise (a
   * read that confirms the value), the flight stays registered and unsettled until it resolves.
   */
  readonly rescue?: ((failure: Failure) => Rescue | undefined | PromiseLike<Rescue | undefined>) | undefined;
  /** The tags the fill's value is written with, if any. */
  readonly tags?: readonly string[] | undefined;
  /** The `checkValue` of the call that starts the flight, as {@link toValueCheck} made it, if any. */
  readonly check?: ValueCheck | undefined;
  /**
   * Whether the caller that starts the flight gave a `waitUntil`, which keeps the flight's work
   * alive after its request has answered. Only read on isolated runtimes (see `Flight.heartbeat`).
   * @default false
   */
  readonly handedOff?: boolean | undefined;
}

/**
 * One fill in flight for one (cache, key) in this process, and the callers awaiting it.
 *
 * Life: created and entered in its cache's registry when a miss (or a stale read) starts a fill;
 * joined by the callers that miss meanwhile; settled once, by the fill's outcome or by giving up
 * (its `fillTimeout` passed, or every caller left); removed from the registry by `detach`, which may
 * come after the settle (a flight stays joinable, already settled, until its write has landed).
 *
 * Callers without an abort signal or a limit of their own share one promise (the leader has its
 * own, since it alone gets the fill's own error), so a herd of 10,000 allocates nothing per waiter.
 * A caller with a signal, or with a `fillTimeout` that ends before the flight's, gets its own promise
 * so that it can leave alone: when its signal aborts or its own limit passes, it stops waiting and the
 * fill goes on for the others.
 *
 * Every copy of the core loaded in one process shares the registry (see shared.ts), so what another
 * copy uses of a flight it did not create (`key`, `background`, `invalidated`, `frame`, `join`,
 * `detach`) is part of that shared layout: changing it after a release needs a new layout version.
 * `check` and `joinStored`, added later, are used only where present (a flight of an older copy has
 * neither: a caller with a check of its own then checks the value `join` gives).
 */
export class Flight {
  /** The key being filled. Set at construction. */
  readonly key: string;
  /**
   * True for a stale-while-revalidate refresh. Set at construction. Such a flight has no leader and
   * is never abandoned: its callers already have the stale value, and it exists to write a new one.
   */
  readonly background: boolean;
  /**
   * When the flight started (ms since the epoch). Set at construction. Not the entry's `createdAt`,
   * which is when the fill function was called (after any lock wait): the value claims the age of
   * the data the fill read, neither of its write nor of a wait before (a wait that began before an
   * invalidation would date a value read after it as older, and have it refused).
   */
  readonly startedAt: number;
  /**
   * When the flight's `fillTimeout` gives it up (ms since the epoch; infinite without one). Set at
   * construction. A joiner whose own limit ends no earlier needs no timer of its own.
   */
  readonly deadline: number;
  /**
   * The tags its value will be written with (`undefined` for none). Set at construction;
   * `invalidateTags` marks the flight `invalidated` when it shares one of them.
   */
  readonly tags: readonly string[] | undefined;
  /**
   * When the value this flight delivered stops being fresh (ms since the epoch), set when it
   * settles with a value it writes; until then infinite. A settled flight stays registered until its
   * write lands, and a caller joins it only before this time: a value is never handed out as fresh
   * past its `freshUntil`.
   */
  freshUntil = Number.POSITIVE_INFINITY;
  /**
   * Started because its caller's `checkValue` refused the value the read found (set by the miss
   * that starts it). Only such a flight is closed to callers with another check before they read:
   * for them that value may be a hit (see `foregroundFlight`).
   */
  afterRefusal = false;
  /**
   * The `checkValue` of the call that started the flight (`undefined` for none). Set at
   * construction. Its callers' values passed it (a schema's output); a caller with another check
   * joins with `joinStored` and runs its own.
   */
  readonly check: ValueCheck | undefined;
  /**
   * Aborted when the flight is given up (`fillTimeout`, or every caller left), never after it
   * settled otherwise. Its signal is the fill's `signal`; it also ends a lock wait and releases the
   * fill lock even if the fill itself never returns.
   */
  readonly controller = new AbortController();
  /**
   * Callers still waiting. `join`/`joinAsLeader` add one; a caller with its own signal or limit
   * removes itself when it leaves; `settle` resets it to 0. When a leave brings it to 0 before a
   * foreground flight settles, the flight is abandoned. A background flight counts only joiners.
   */
  callers = 0;
  /**
   * Joiners watching from their own request context (`isolatedRequests`): not in `callers`, since
   * they leave without abandoning, but while any watches the flight is not abandoned either.
   */
  private watchers = 0;
  /**
   * Set (never cleared) by `setValue`/`invalidate`/`invalidateTags` while the flight runs: the key changed under the
   * fill, so its result still reaches the callers but is not written.
   */
  invalidated = false;
  /**
   * Set (never cleared) by `invalidateTags` while the flight runs when the entry its fail-safe
   * `fallback` (or its early answer) came from carries one of the tags: the fill may still write its
   * own value, but that previous value must not answer anyone any more (a soft timeout, a late
   * joiner). `invalidated` implies it.
   */
  fallbackInvalidated = false;
  /**
   * While this is a refresh of a stale entry and a synchronous adapter keeps a change count: the
   * entry a stale read found, the options it was served with and the count then (see
   * `get-or-compute.ts`, staleAgain). Later stale reads answer from it while all three hold.
   */
  staleRead: StaleRead | undefined = undefined;
  /**
   * Written once, by `settle`; undefined until then. Once set the flight is over for its callers
   * (a later `join` gets it at once, a later `settle` is ignored); what is left is the write and the
   * lock's release.
   */
  result: FlightResult | undefined = undefined;
  /** How many tag invalidations this process had made when the flight started (`tags.ts`). */
  readonly invalidationsBefore: number;
  /**
   * Set when the fill function is called (after the lock protocol): a flight given up before then
   * (`fillTimeout` during a lock wait) ran no fill, and emits no `fill` event.
   */
  fillStarted = false;
  /**
   * The async context of the fill function, set by `callFill` (fill-context.ts) just before it runs,
   * and only where the runtime tracks async context. `coalesce` reads it to refuse a call from inside
   * this very fill, which would wait for itself.
   */
  frame: FillFrame | undefined = undefined;
  /**
   * The previous value fail-safe may answer with instead of a failure. Set at construction (from the
   * read that missed), never changed; whether it may still be used (its `until`, `invalidated`) is
   * decided when the fill fails or its soft timeout passes.
   */
  readonly fallback: Fallback | undefined;
  /**
   * Set once, by `answerEarly` (a soft timeout), while `result` is still undefined: every caller had
   * this value (fail-safe's previous one, from `entry`) and left. The fill goes on, no longer
   * abandoned when its callers leave, and settles later as usual. A caller joining afterwards gets
   * this value at once only when its own options would have answered with it (see `join`);
   * otherwise it waits for the fill's own result.
   */
  early:
    | { readonly value: unknown; readonly stored: unknown; readonly entry?: CacheEntry | undefined }
    | undefined = undefined;
  /**
   * The write of fail-safe's re-armed value, set when fail-safe answered for this flight's failure;
   * the fill lock is released only after it has landed, so a replica waiting for the lock finds it.
   */
  rearming: Promise<void> | undefined = undefined;
  /**
   * On isolated runtimes (`isolatedRequests`, workerd) only, else undefined: when the flight last
   * showed a sign of life (ms since the epoch). Set to `startedAt` at construction, then every
   * `HEARTBEAT_MS` (250 ms) by a timer armed in the request context that started the flight, which is
   * the context its fill and its write run in; that timer stops once the flight has settled and left
   * the registry (its write done). workerd ends a request's context when it has answered (or its
   * `waitUntil` work is done), and with it the fill's I/O and this timer: a beat older than
   * `SILENT_FLIGHT_MS` (2 s) means the fill can never settle, or its write never land (see `gone`).
   */
  heartbeat: number | undefined = undefined;
  /**
   * Isolated runtimes: the latest due time of a timer a caller let pass to tell a busy isolate from
   * a gone request (`isolated-flights.ts` `timerTurn`), and that turn while it is pending.
   */
  turnDue = Number.NEGATIVE_INFINITY;
  turn: Promise<void> | undefined = undefined;
  /**
   * Whether a `waitUntil` keeps the flight's work alive after its request has answered
   * (`FlightOptions.handedOff`). Set at construction.
   */
  readonly handedOff: boolean;

  /** Where the flight is registered; `detach` removes it only if it is still the key's flight. */
  private readonly registry: Map<string, Flight>;
  private readonly onTimeout: (flight: Flight) => void;
  private readonly onSettle: ((flight: Flight) => void) | undefined;
  private readonly rescue: FlightOptions['rescue'];
  /** The `fillTimeout` timer: armed at construction, cleared by `settle`. */
  private readonly timeout: LongTimeout | undefined;
  /** The leader's promise, made on its `joinAsLeader` (when it has no signal or limit of its own). */
  private leader: Deferred | undefined = undefined;
  /** The promise every joiner without a signal or limit of its own shares, made by the first. */
  private shared: Deferred | undefined = undefined;
  /** The error those joiners share, made once on failure so that 10,000 of them cost one. */
  private sharedError: CacheFillError | undefined = undefined;
  /** How to answer each caller that has a promise of its own; it leaves this set when it leaves. */
  private readonly individual = new Set<(result: FlightResult) => void>();
  /** The timer that writes `heartbeat`: armed at construction on isolated runtimes, cleared by `settle`. */
  private readonly pulse: ReturnType<typeof setInterval> | undefined;
  /**
   * Set once, by `reap`, while `result` is undefined: the flight's request is gone. The error every
   * watcher stops waiting with; `result` stays undefined unless the fill comes back after all.
   */
  private reaped: CacheFillError | undefined = undefined;
  /** Set once `onSettle` has run (by `settle` or `reap`, whichever came first). */
  private endReported = false;

  constructor(options: FlightOptions) {
    this.key = options.key;
    this.background = options.background;
    this.registry = options.registry;
    this.onTimeout = options.onTimeout;
    this.onSettle = options.onSettle;
    this.fallback = options.fallback;
    this.rescue = options.rescue;
    this.startedAt = Date.now();
    this.invalidationsBefore = invalidations().seq;
    this.tags = options.tags;
    this.check = options.check;
    this.registry.set(this.key, this);
    const limit = options.fillTimeout;
    this.deadline = limit === undefined ? Number.POSITIVE_INFINITY : this.startedAt + limit;
    // A long timer: fillTimeout may exceed the 24.8-day limit of a single one.
    this.timeout = limit === undefined ? undefined : setLongTimeout(() => this.timedOut(limit), limit);
    this.handedOff = options.handedOff === true;
    if (isolatedRequests()) {
      this.heartbeat = this.startedAt;
      this.pulse = setInterval(() => {
        this.heartbeat = Date.now();
      }, HEARTBEAT_MS);
      // Where timers can hold a process open (Node with `isolatedRequests` set by hand), this one must not.
      (this.pulse as { unref?: () => void }).unref?.();
    }
  }

  /** Waits for this fill as the caller that started it: it alone gets the fill's own error. */
  joinAsLeader(signal: AbortSignal | undefined, limit: number | undefined): Promise<unknown> {
    return this.wait('leader', signal, limit, false, false);
  }

  /**
   * Waits for this fill as a caller that found it in flight. `signal` and `limit` (this caller's own
   * `fillTimeout`, ms) let this caller stop waiting before the fill ends. After a soft timeout
   * (`early`), `takesEarly` (this caller's own fail-safe would answer with that previous value:
   * `takesEarlyAnswer`) has it at once; without it the caller waits for the fill's own result (a
   * caller without fail-safe, or past its `maxStale`, never gets a previous value).
   */
  join(signal: AbortSignal | undefined, limit: number | undefined, takesEarly = false): Promise<unknown> {
    return this.wait('joiner', signal, limit, takesEarly, false);
  }

  /**
   * {@link join}, answered with the value as the cache holds it rather than as the flight's `check`
   * made it: for a caller whose own `checkValue` differs, which runs its own check on that value.
   */
  joinStored(
    signal: AbortSignal | undefined,
    limit: number | undefined,
    takesEarly = false,
  ): Promise<unknown> {
    return this.wait('joiner', signal, limit, takesEarly, true);
  }

  /** True while a caller waits for the flight (counted in `callers`, or watching it). */
  waited(): boolean {
    return this.callers > 0 || this.watchers > 0;
  }

  /** Removes the flight from its registry, if it is still the one registered for its key. */
  detach(): void {
    // Out of the registry, it is no longer the refresh a stale read may be answered beside.
    if (this.staleRead !== undefined) {
      if (staleReads.last === this.staleRead) staleReads.last = undefined;
      this.staleRead = undefined;
    }
    if (this.registry.get(this.key) === this) this.registry.delete(this.key);
    // A settled flight's work (its write) is over once it leaves the registry.
    if (this.result !== undefined) this.stopPulse();
  }

  /** Stops the heartbeat's timer (isolated runtimes). */
  private stopPulse(): void {
    if (this.pulse !== undefined) clearInterval(this.pulse);
  }

  /**
   * True when the request context that runs this flight's fill is gone (isolated runtimes only; never
   * on Node): its `heartbeat` has been silent for `SILENT_FLIGHT_MS`, and the flight has not settled,
   * or has settled but is still registered for a write that can then never land.
   */
  gone(): boolean {
    const heartbeat = this.heartbeat;
    if (heartbeat === undefined || Date.now() - heartbeat < SILENT_FLIGHT_MS) return false;
    // Unsettled; or settled and still registered, its write never landed: later calls would get its
    // value, however old, for as long as the isolate lives.
    return this.result === undefined || this.registry.get(this.key) === this;
  }

  /**
   * Gives up a flight whose request context is gone (`gone`, or a `fillTimeout` timer that never
   * fired): it leaves the registry (the next call fills afresh), its watchers stop waiting with a
   * `'timeout'` error whose message is `why`, a background flight frees its refresh slot
   * (`onSettle` runs now), and it counts as a fill timeout.
   *
   * Called from another request's context, so it touches nothing that belongs to the gone one: the
   * fill is not aborted (on workerd, aborting a signal handed to that request's `fetch` throws) and
   * the promises of its own callers are left alone (nothing there can hear them, and workerd refuses
   * to settle them from here). The flight is not settled either: were its request alive after all,
   * its fill would still answer its own callers and write, as usual. A fill lock it holds lapses
   * after `lockTtl`.
   */
  reap(why: string): void {
    this.detach();
    if (this.result !== undefined || this.reaped !== undefined) return;
    const cause = new Error(why);
    cause.name = 'TimeoutError';
    this.reaped = new CacheFillError('timeout', this.key, why, { cause });
    this.stopPulse();
    this.ended();
    this.onTimeout(this);
  }

  /**
   * True once the flight was given up as gone (`reap`): it was counted then (a fill timeout, its
   * fill event), so how its fill ends later, should its request be alive after all, is not.
   */
  get wasReaped(): boolean {
    return this.reaped !== undefined;
  }

  /** Runs `onSettle` once: when the flight settles, or earlier when it is reaped. */
  private ended(): void {
    if (this.endReported) return;
    this.endReported = true;
    this.onSettle?.(this);
  }

  /** Delivers `result` to every caller; false if the flight had already settled. */
  settle(result: FlightResult): boolean {
    if (this.result !== undefined) return false;
    this.result = result;
    this.callers = 0;
    this.timeout?.clear();
    // The heartbeat goes on while the flight stays registered for its write (see `detach`).
    if (this.registry.get(this.key) !== this) this.stopPulse();
    this.ended();
    if (result.ok) {
      this.leader?.resolve(result.value);
      this.shared?.resolve(result.value);
    } else {
      this.leader?.reject(this.errorFor(result, 'leader'));
      this.shared?.reject(this.errorFor(result, 'joiner'));
    }
    for (const answer of this.individual) answer(result);
    this.individual.clear();
    return true;
  }

  /**
   * Answers every caller now with `value` (fail-safe's previous value from `entry`, after a soft
   * timeout) while the fill goes on: the callers leave. A caller that joins later waits for the
   * fill's own result unless it asks for the early value (see `join`). False when the flight has
   * already settled or answered early.
   */
  answerEarly(value: unknown, entry?: CacheEntry): boolean {
    if (this.result !== undefined || this.early !== undefined) return false;
    const stored = entry === undefined ? value : storedEntryOf(entry).value;
    this.early = { value, stored, entry };
    this.callers = 0;
    this.leader?.resolve(value);
    this.shared?.resolve(value);
    // Later joiners that wait for the fill get promises of their own.
    this.leader = undefined;
    this.shared = undefined;
    const result = answered(value, stored);
    for (const answer of this.individual) answer(result);
    this.individual.clear();
    return true;
  }

  /** `stored`: answer with the value as the cache holds it (see {@link joinStored}). */
  private wait(
    role: Role,
    signal: AbortSignal | undefined,
    limit: number | undefined,
    takesEarly: boolean,
    stored: boolean,
  ): Promise<unknown> {
    const settled = this.result;
    if (settled !== undefined) {
      return settled.ok
        ? Promise.resolve(stored ? storedOf(settled) : settled.value)
        : Promise.reject(this.errorFor(settled, role));
    }
    const early = this.early;
    if (early !== undefined && takesEarly) return Promise.resolve(stored ? early.stored : early.value);
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    // The leader's limit is the flight's own deadline; a joiner's matters only if it ends earlier.
    const timed = limit !== undefined && Date.now() + limit < this.deadline;
    if (role === 'joiner' && isolatedRequests())
      return this.watch(signal, timed ? limit : undefined, takesEarly, stored);
    this.callers++;
    if (signal === undefined && !timed && !stored) {
      if (role === 'leader') {
        this.leader ??= deferred();
        return this.leader.promise;
      }
      this.shared ??= deferred();
      return this.shared.promise;
    }
    return new Promise((resolve, reject) => {
      let timer: LongTimeout | undefined;
      let stopListening: (() => void) | undefined;
      const stop = (): void => {
        timer?.clear();
        // A signal whose removeEventListener throws must not keep this caller, or the callers
        // answered after it, waiting.
        try {
          stopListening?.();
        } catch {}
      };
      const answer = (result: FlightResult): void => {
        if (result.ok) resolve(stored ? storedOf(result) : result.value);
        else reject(this.errorFor(result, role));
        stop();
      };
      const leave = (reason: unknown, error: unknown): void => {
        if (!this.individual.delete(answer)) return;
        stop();
        reject(error);
        this.callers--;
        // Past a soft timeout the fill goes on for its write, as a refresh does.
        if (this.callers === 0 && !this.background && this.result === undefined && this.early === undefined) {
          if (this.watchers === 0) this.abandon(reason);
          // Isolated runtimes: the callers of the request that runs the fill have all left, so that
          // request may answer and end at any moment, taking the fill with it (unless a `waitUntil`
          // keeps it). The requests watching it keep watching, but a later call starts a fill of
          // its own rather than join one that may be dying.
          else if (this.heartbeat !== undefined && !this.handedOff) this.detach();
        }
      };
      this.individual.add(answer);
      if (signal !== undefined) {
        stopListening = onAbort(signal, () => {
          const reason = abortReason(signal);
          leave(reason, reason);
        });
      }
      if (timed) {
        timer = setLongTimeout(() => {
          const error = this.callerTimeout(limit);
          leave(error.cause, error);
        }, limit);
      }
    });
  }

  /**
   * Waits for this fill as a joiner without awaiting anything the fill settles: the promise is made
   * here, in the caller's request context, and settled from timers of that context that look at
   * `result` (first after 1 ms, then at doubling intervals up to 10 ms). On workerd a request must
   * not await a promise that another request's work settles: it is cancelled as hung, and the
   * settlement is refused. Such a joiner is not counted in `callers`, so its leaving never abandons
   * the fill (the abort would run the fill's own clean-up from this request's context); it stops
   * waiting on its own signal and its own `limit`, and the fill goes on.
   *
   * The wait is bounded even without a limit: when the request that runs the fill is gone (its
   * `heartbeat` silent for `SILENT_FLIGHT_MS`, or its `fillTimeout` timer never fired), the watcher
   * gives the flight up (`reap`) and every watcher gets a `'timeout'` error.
   */
  private watch(
    signal: AbortSignal | undefined,
    limit: number | undefined,
    takesEarly: boolean,
    stored: boolean,
  ): Promise<unknown> {
    // A watcher that joined before the soft timeout was one of the callers it answered.
    const joinedBefore = this.early === undefined;
    return new Promise((resolve, reject) => {
      const giveUpAt = limit === undefined ? Number.POSITIVE_INFINITY : Date.now() + limit;
      let delay = WATCH_FIRST_MS;
      let lookedAt = Date.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      let stopListening: (() => void) | undefined;
      this.watchers++;
      const stop = (): void => {
        this.watchers--;
        clearTimeout(timer);
        stopListening?.();
      };
      const look = (): void => {
        const now = Date.now();
        // A look that comes late (this isolate was busy) may find the heartbeat late for the same
        // reason: silence counts only when this watcher's own timers ran on time meanwhile.
        const onTime = now - lookedAt < HEARTBEAT_MS;
        lookedAt = now;
        // Past a soft timeout the fill is still watched: a watcher may wait for its own result.
        if (onTime && this.result === undefined && this.reaped === undefined) {
          if (now >= this.deadline + DEAD_FLIGHT_MS) {
            this.reap(
              `fill of '${this.key}' did not settle within its ${this.deadline - this.startedAt}ms (fillTimeout) and its timer never fired (the request that started it is gone); the next call starts a new fill`,
            );
          } else if (this.gone()) {
            this.reap(
              `fill of '${this.key}' can never settle: the request that runs it is gone (on workerd, a request's work is cancelled when it has answered; pass waitUntil to keep a fill alive); the next call starts a new fill`,
            );
          }
        }
        const result: FlightResult | undefined =
          this.result ??
          (this.early === undefined || !(takesEarly || joinedBefore)
            ? undefined
            : answered(this.early.value, this.early.stored));
        if (result !== undefined) {
          stop();
          if (result.ok) resolve(stored ? storedOf(result) : result.value);
          else reject(this.errorFor(result, 'joiner'));
          return;
        }
        if (this.reaped !== undefined) {
          stop();
          reject(this.reaped);
          return;
        }
        const left = giveUpAt - now;
        if (left <= 0) {
          stop();
          reject(this.callerTimeout(limit));
          return;
        }
        timer = setTimeout(look, Math.min(delay, left));
        delay = Math.min(delay * 2, WATCH_CEILING_MS);
      };
      if (signal !== undefined) {
        stopListening = onAbort(signal, () => {
          stop();
          reject(abortReason(signal));
        });
      }
      timer = setTimeout(look, delay);
      delay *= 2;
    });
  }

  /** The error of a caller that stopped waiting after its own `limit` (ms) while the fill goes on. */
  private callerTimeout(limit: number | undefined): CacheFillError {
    return this.timeoutError(
      `fill of '${this.key}' did not settle within this caller's ${limit}ms (fillTimeout); it goes on for its other callers`,
    );
  }

  /** A `'timeout'` fill error whose `cause` is a `TimeoutError` with the same message. */
  private timeoutError(message: string): CacheFillError {
    const cause = new Error(message);
    cause.name = 'TimeoutError';
    return new CacheFillError('timeout', this.key, message, { cause });
  }

  /** The last caller left: nobody wants the value, so stop the fill and let the next caller start afresh. */
  private abandon(reason: unknown): void {
    this.giveUp({ ok: false, kind: 'abandoned', error: reason });
  }

  private timedOut(limit: number): void {
    const error = new Error(`fill of '${this.key}' did not settle within ${limit}ms (fillTimeout)`);
    error.name = 'TimeoutError';
    const failure: Failure = { ok: false, kind: 'timeout', error };
    const finish = (rescue: Rescue | undefined): void =>
      this.giveUp(
        failure,
        () => {
          rescue?.activate();
          // A reaped flight was counted as a timeout then (its request looked gone, yet its timer
          // fired: it was only late); its own callers still hear the timeout.
          if (this.reaped === undefined) this.onTimeout(this);
        },
        rescue?.answer,
      );
    const rescuing = this.rescue?.(failure);
    if (rescuing === undefined || !('then' in rescuing)) finish(rescuing);
    else rescuing.then(finish, () => finish(undefined));
  }

  /**
   * Ends the flight before its fill does. It leaves the registry before its callers hear, so a
   * caller that retries starts a new fill; then the fill is aborted (its lock released). Its callers
   * hear `answer` when given (fail-safe's previous value), else `result`.
   */
  private giveUp(result: Failure, report?: () => void, answer: FlightResult = result): void {
    this.detach();
    if (!this.settle(answer)) return;
    report?.();
    this.controller.abort(result.error);
  }

  private errorFor(result: Failure, role: Role): CacheFillError {
    if (result.kind === 'fill' && role === 'leader') {
      return new CacheFillError('fill', this.key, messageOf(result.error), { cause: result.error });
    }
    if (role === 'joiner' && this.sharedError !== undefined) return this.sharedError;
    const error =
      result.kind === 'fill'
        ? new CacheFillError('fill_failed', this.key, messageOf(result.error), { cause: result.error })
        : result.kind === 'timeout'
          ? new CacheFillError('timeout', this.key, messageOf(result.error), { cause: result.error })
          : new CacheFillError('fill_failed', this.key, 'every caller of this fill left before it finished');
    if (role === 'joiner') this.sharedError = error;
    return error;
  }
}
