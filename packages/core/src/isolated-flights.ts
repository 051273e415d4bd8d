import type { Flight } from './flight.js';
import type { CacheState } from './registry.js';
import { isolatedRequests } from './shared.js';
import { reportWarning } from './stats.js';

// Flights whose request is gone, on runtimes that isolate requests (`isolatedRequests`: workerd).
//
// There a fill runs in the context of the request that started it. When that request has answered
// and no `waitUntil` keeps its work alive, workerd ends the context: the fill's I/O is cancelled and
// its promise never settles, nor do its context's timers (its `fillTimeout` included) ever fire.
// Requests that joined the fill watch it from their own timers; without a bound they would wait for
// it forever, and so would every later call of the key. So each flight beats a heartbeat from a
// timer in its own context, and a flight whose heartbeat has been silent for `SILENT_FLIGHT_MS` is
// given up by whoever looks at it next (`Flight.reap`). The bound is on silence, not on the fill's
// duration: a slow fill whose request is alive (its caller awaits it, or `waitUntil` keeps it) is
// never cut short, just as on Node.

/**
 * How often a flight on an isolated runtime records that its request context still runs (ms).
 * @default 250
 */
export const HEARTBEAT_MS = 250;

/**
 * How long a flight's heartbeat may be silent before the flight counts as dead (ms): its watchers
 * stop waiting for it with a `'timeout'` `CacheFillError`, it leaves the registry (the next call
 * fills afresh), and a background refresh frees its refresh slot. Eight missed beats: a live request
 * is never mistaken for a dead one because the isolate was busy for a moment.
 * @default 2000
 */
export const SILENT_FLIGHT_MS = 2_000;

// A heartbeat is silent either because its request is gone or because the isolate was busy (a long
// synchronous stretch holds every timer back). Timers run in the order they fall due, so a timer
// due after a live flight's next beat runs after that beat: once a call has let such a timer turn
// pass (`timerTurn`) and the heartbeat is still silent, the flight's request is gone.

/**
 * Resolves after one timer turn (a 0 ms timer armed now), recording on `flight` that a timer due
 * now has run (`Flight.turnDue`). One turn at a time per flight, shared by every caller meanwhile.
 */
export function timerTurn(flight: Flight): Promise<void> {
  if (flight.turn !== undefined) return flight.turn;
  const due = Date.now();
  const turn = new Promise<void>((resolve) => {
    setTimeout(() => {
      if (due > flight.turnDue) flight.turnDue = due;
      flight.turn = undefined;
      resolve();
    }, 0);
  });
  flight.turn = turn;
  return turn;
}

/**
 * Whether `flight`'s heartbeat has been silent for {@link SILENT_FLIGHT_MS} with no timer seen to
 * run since (isolated runtimes): its request may be gone, or the isolate busy. The caller should
 * neither join it nor start a second fill beside it, but let a timer turn pass ({@link timerTurn})
 * and look again: by then a live flight has beaten, and a gone one is given up by `liveFlight`.
 */
export function silentUnproven(flight: Flight): boolean {
  return flight.heartbeat !== undefined && flight.gone();
}

/**
 * The flight of `key` in `registry`, unless its request is gone ({@link SILENT_FLIGHT_MS} without a
 * heartbeat while timers ran, on an isolated runtime): such a flight is given up (out of the
 * registry, its refresh slot freed) and `undefined` is returned, so the caller fills, or refreshes,
 * afresh. A flight silent without that proof is returned (see {@link silentUnproven}). On Node a
 * flight has no heartbeat and this is `registry.get(key)`.
 *
 * `miss` is true for a cold miss about to join the flight. On an isolated runtime it does not join a
 * background refresh that no `waitUntil` keeps alive: the request that started it answered at once
 * with the stale value, so the refresh is dead or about to be. That refresh is given up (it still
 * writes, should it finish) and the miss fills afresh.
 */
export function liveFlight(registry: Map<string, Flight>, key: string, miss = false): Flight | undefined {
  const flight = registry.get(key);
  // A flight made by an older copy of the core (one registry per process) has no heartbeat: live.
  if (flight === undefined || flight.heartbeat === undefined) return flight;
  if (flight.gone() && flight.turnDue - flight.heartbeat >= SILENT_FLIGHT_MS) {
    flight.reap(
      `fill of '${key}' was given up: the request that ran it is gone (on workerd, a request's work is cancelled when it has answered; pass waitUntil to keep a fill alive)`,
    );
    return undefined;
  }
  if (miss && flight.background && !flight.handedOff && flight.result === undefined) {
    flight.reap(
      `refresh of '${key}' was given up: it was started without waitUntil, and the request that started it has answered`,
    );
    return undefined;
  }
  return flight;
}

// Caches warned that a fill started without `waitUntil` on an isolated runtime, once each.
const warnedNoWaitUntil = new WeakSet<CacheState>();

/**
 * Warns once per cache when a fill or a background refresh starts on an isolated runtime (workerd)
 * without a `waitUntil`: its write, its lock release, and the fill itself when its request answers
 * first (a caller that left, a stale read), are cancelled with the request.
 */
export function warnIfNotKeptAlive(state: CacheState, waitUntil: unknown): void {
  if (waitUntil !== undefined || !isolatedRequests() || warnedNoWaitUntil.has(state)) return;
  warnedNoWaitUntil.add(state);
  reportWarning(
    state.name,
    `stampede: cache '${state.name}' started a fill without waitUntil on a runtime that isolates requests ` +
      "(Cloudflare Workers). workerd cancels a request's work when the request ends, so a fill or a " +
      'background refresh still running then never finishes and its value is not written (the requests ' +
      `waiting for it give it up after ${SILENT_FLIGHT_MS / 1000}s without a sign of life, and the next call fills again). ` +
      'Pass the waitUntil of the request to getOrComputeWith: `waitUntil: (promise) => ctx.waitUntil(promise)`, ' +
      "or `import { waitUntil } from 'cloudflare:workers'`.",
  );
}
