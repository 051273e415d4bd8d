import { shared } from './shared.js';

// The coarse clock: a time the hit path may read instead of `Date.now()` when all it needs to know
// is that an entry is far from expiry.
//
// A clock read costs 20-50 ns (45-55 ns on a VM's kvm-clock): on a hit that is a third of the whole
// call. A clock cached by the event loop (a timer that clears it every millisecond) is cheap but can
// be arbitrarily old: timers do not fire while the caller runs synchronous work or a loop of
// awaited hits, and a value would be served as fresh long past its expiry. So the coarse time is
// written by a thread of its own (Node's `worker_threads`, started by the `node` entry point), which
// the caller's event loop cannot hold up: the same design as log4j2's CachedClock.
//
// The thread writes whole seconds into a Uint32 cell: an integer element of a SharedArrayBuffer is
// read and written whole (the memory model promises no tearing for integer elements, not for a
// Float64 one), so no reader ever sees half of an old time and half of a new one. 0 means "no time".
//
// It is trusted only to say "more than COARSE_MARGIN_MS from expiry": a hit within that margin of
// `freshUntil` (or `staleUntil`) reads the real clock. The coarse time trails the real one by under
// a second (whole seconds) plus the thread's tick plus how long the OS leaves it unscheduled; once
// it trails by more than LAG_LIMIT_MS, the next sample (below) stops trusting it, so nothing is
// served as fresh past its time unless the thread stalls for the margin between two samples.
//
// The thread runs only while hits come fast enough that it is cheaper than the clock reads it
// replaces: it starts after ENGAGE_WINDOWS samples in a row at ENGAGE_RATE hits per ms or more,
// goes to sleep (0 CPU) when fewer than DISENGAGE_BEATS samples reach it in a second, and ends
// after EXIT_AFTER_MS asleep (giving its memory back, about 10 MB). A stale-while-revalidate refresh
// also wakes a sleeping thread (never starts one): its key's readers crowd in until it lands, each a
// stale read (see wakeClockThread). `configure({ clockThread: false })` turns it off; runtimes
// without `worker_threads` never start it, and their hits read the real clock.

/** How far from expiry an entry must be, by the coarse time, for a hit to skip the real clock. */
export const COARSE_MARGIN_MS = 2000;
/** How far the coarse time may trail the real one (seen at a sample) before it is not trusted. */
export const LAG_LIMIT_MS = 1500;
/**
 * How often the clock thread writes the time, in milliseconds. Each wake costs the thread some
 * 50 us of CPU on a VM (a timer and a futex), so about 0.1% of a core at this tick.
 */
export const TICK_MS = 50;
/** Hits between two samples: a real clock reading, the rate check and the thread's heartbeat. */
export const SAMPLE_EVERY = 1024;
/** Hits per millisecond (250,000 a second) from which the thread costs less than the reads. */
export const ENGAGE_RATE = 250;
/** How many samples in a row must come at that rate before the thread starts (about 65 ms). */
export const ENGAGE_WINDOWS = 16;
/**
 * Fewer samples than this in a second put the thread to sleep (about 51,000 hits a second, where
 * the clock reads it saves cost about as much as the thread).
 */
export const DISENGAGE_BEATS = 50;
/** How long the thread sleeps before it ends, in milliseconds. */
export const EXIT_AFTER_MS = 30_000;

/** The layout of the shared buffer: the seconds cell (Uint32) at byte 0, the control cells after it. */
export const BUFFER_BYTES = 16;
export const CONTROL_OFFSET = 4;
/** The control cells (Int32) shared with the thread: its state, the heartbeat and a cell to sleep on. */
export const STATE = 0;
export const BEAT = 1;
export const SLEEP = 2;
export const RUNNING = 1;
export const IDLE = 2;
export const EXITED = 3;

/** Starts the clock thread on `buffer` (see `clockThreadSource`); throws when it cannot. */
export type StartClockThread = (buffer: SharedArrayBuffer) => void;

/** The coarse clock's process-wide state (on `shared`, so that every copy of the core uses one). */
export interface CoarseClock {
  /** Shared with the thread (see {@link BUFFER_BYTES}). */
  readonly buffer: SharedArrayBuffer | ArrayBuffer;
  /** `[0]`: the time the thread last wrote, in whole seconds since the epoch; 0 while none is trusted. */
  readonly seconds: Uint32Array;
  /** The cells {@link STATE}, {@link BEAT} and {@link SLEEP}. */
  readonly control: Int32Array;
  /** Hits since the last sample. */
  hits: number;
  /** When the last sample was taken (real clock). */
  sampledAt: number;
  /** Samples in a row that came at {@link ENGAGE_RATE} or faster. */
  fastSamples: number;
  /** `Date.now` when the thread started: a replaced one (fake timers) makes the thread's time moot. */
  native: (() => number) | undefined;
  /** Starts a thread; set by the `node` entry point. */
  start: StartClockThread | undefined;
  /** `configure({ clockThread })`. */
  enabled: boolean;
  /** A thread could not be started or failed: none is started again in this process. */
  broken: boolean;
}

function create(): CoarseClock {
  // One buffer for the life of the process, so that the hit path always reads the same array (a
  // second array of another kind would make it polymorphic); each thread started works on it.
  // A browser page that is not cross-origin isolated has no SharedArrayBuffer: the core still loads,
  // on a plain buffer no thread can share (it is marked broken, so none is started, and every hit
  // reads the real clock).
  const shareable = typeof SharedArrayBuffer === 'function';
  const buffer = shareable ? new SharedArrayBuffer(BUFFER_BYTES) : new ArrayBuffer(BUFFER_BYTES);
  const control = new Int32Array(buffer, CONTROL_OFFSET, 3);
  control[STATE] = EXITED;
  return {
    buffer,
    seconds: new Uint32Array(buffer, 0, 1),
    control,
    hits: 0,
    sampledAt: 0,
    fastSamples: 0,
    native: undefined,
    start: undefined,
    enabled: true,
    broken: !shareable,
  };
}

shared.clock ??= create();
const clock: CoarseClock = shared.clock;

/**
 * The coarse time: a recent reading of the clock, never later than the real one, or `+Infinity`
 * while no thread keeps it (then every margin check fails and the caller reads the real clock).
 * Call it once per hit: it counts hits to decide whether the thread is worth running.
 */
export function coarseNow(): number {
  const c = clock;
  if (++c.hits >= SAMPLE_EVERY) sample(c);
  const seconds = c.seconds[0] as number;
  return seconds !== 0 && Date.now === c.native ? seconds * 1000 : Number.POSITIVE_INFINITY;
}

/**
 * Whether the time is still before `until` (a `freshUntil`): by the coarse clock when `until` is
 * more than {@link COARSE_MARGIN_MS} ahead of it, else by the real one.
 */
export function stillBefore(until: number): boolean {
  const coarse = coarseNow();
  return (coarse !== Number.POSITIVE_INFINITY && until - coarse > COARSE_MARGIN_MS) || Date.now() < until;
}

function sample(c: CoarseClock): void {
  c.hits = 0;
  const now = Date.now();
  const elapsed = now - c.sampledAt;
  c.sampledAt = now;
  // A thread that stopped writing (kept off the CPU, or gone without its exit event yet) is not
  // trusted until it writes again.
  const seconds = c.seconds[0] as number;
  if (seconds !== 0 && now - seconds * 1000 > LAG_LIMIT_MS) c.seconds[0] = 0;
  const control = c.control;
  if (Atomics.load(control, STATE) === RUNNING) {
    Atomics.add(control, BEAT, 1);
    return;
  }
  if (elapsed >= 0 && elapsed * ENGAGE_RATE <= SAMPLE_EVERY) {
    if (++c.fastSamples >= ENGAGE_WINDOWS) engage(c);
  } else c.fastSamples = 0;
}

const NATIVE_SOURCE = /\{\s*\[native code\]\s*\}\s*$/;

function engage(c: CoarseClock): void {
  c.fastSamples = 0;
  const now = Date.now;
  if (
    !c.enabled ||
    c.broken ||
    c.start === undefined ||
    !NATIVE_SOURCE.test(Function.prototype.toString.call(now))
  )
    return;
  c.native = now;
  const control = c.control;
  const state = Atomics.compareExchange(control, STATE, IDLE, RUNNING);
  if (state === IDLE) {
    Atomics.notify(control, STATE);
    return;
  }
  if (state === RUNNING || Atomics.compareExchange(control, STATE, EXITED, RUNNING) !== EXITED) return;
  c.seconds[0] = 0;
  try {
    // Shared whenever a thread may start (`broken` otherwise).
    c.start(c.buffer as SharedArrayBuffer);
  } catch {
    // Not allowed here (a permission model, a sandbox): hits read the real clock from now on.
    c.broken = true;
    Atomics.store(control, STATE, EXITED);
  }
}

/**
 * Wakes a sleeping thread at once, without the sustained rate {@link engage} waits for: a
 * stale-while-revalidate refresh has just started, and until it lands every read of its key is a
 * stale read (a herd's worth, typically, read in the first milliseconds after expiry). An atomic
 * exchange and a notify, only when the thread sleeps; a thread that ended is not started here (that
 * costs milliseconds of the caller's time and some 10 MB). Unless hits keep coming at the
 * {@link DISENGAGE_BEATS} rate, the thread goes back to sleep a second later.
 *
 * The thread takes tens of microseconds to be scheduled, about as long as a burst of 500 stale
 * reads takes: so the waker writes the time itself (one clock reading), as the thread would on
 * waking, and the burst reads it instead of the real clock. The thread, running from the exchange
 * on, keeps it current; one that never ran would be caught as any stalled thread is, by the next
 * sample's lag check.
 */
export function wakeClockThread(): void {
  const c = clock;
  // Under a replaced Date.now (fake timers) the thread's time is not read anyway.
  if (!c.enabled || Date.now !== c.native) return;
  const control = c.control;
  if (Atomics.compareExchange(control, STATE, IDLE, RUNNING) === IDLE) {
    c.seconds[0] = Math.floor(Date.now() / 1000);
    Atomics.notify(control, STATE);
  }
}

/**
 * Marks the thread as gone (its exit or error event): nothing it wrote is trusted any more. After an
 * exit (30 s asleep) the next engagement starts another; after an error (a runtime whose workers
 * cannot run it) none is started again in this process.
 */
export function clockThreadEnded(failed = false): void {
  clock.seconds[0] = 0;
  Atomics.store(clock.control, STATE, EXITED);
  if (failed) clock.broken = true;
}

/** Lets the `node` entry point start clock threads. */
export function useClockThread(start: StartClockThread): void {
  clock.start ??= start;
}

/** `configure({ clockThread })`: off puts a running thread to sleep at once. */
export function setClockThread(enabled: boolean): void {
  clock.enabled = enabled;
  if (enabled) return;
  clock.fastSamples = 0;
  clock.seconds[0] = 0;
  Atomics.compareExchange(clock.control, STATE, RUNNING, IDLE);
}

/** Whether the clock thread is on (`configure`). */
export function clockThreadEnabled(): boolean {
  return clock.enabled;
}

/** Whether a clock thread is running now (for tests and the bench). */
export function clockThreadRunning(): boolean {
  return Atomics.load(clock.control, STATE) === RUNNING && clock.seconds[0] !== 0;
}
