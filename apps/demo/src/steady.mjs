// Steady load: a constant request rate at a key with a short TTL, through several expiries, and the
// latency of every request, so the page can show what each expiry costs the readers.
import { setTimeout as sleep } from 'node:timers/promises';
import { STAT_NAMES } from '@stampede/core';
import { fleetTotal } from './fleet.mjs';
import { get } from './herd.mjs';

export const STEADY_MAX_RATE = 1_000;
export const STEADY_MAX_SECONDS = 30;
/** A request slower than this waited for the database (a query takes DB_LATENCY_MS, 100 ms by default). */
export const SLOW_MS = 50;

/**
 * @typedef {object} SteadyResult
 * @property {string} variant
 * @property {number} rate - requests per second asked for
 * @property {number} seconds
 * @property {number} n - requests sent
 * @property {boolean} lock
 * @property {boolean} failSafe
 * @property {[number, number, number][]} samples - per request: ms since the start, latency in ms, 1 when it answered the count
 * @property {number} errors
 * @property {number} slow - requests slower than {@link SLOW_MS}
 * @property {number} p50 - ms
 * @property {number} p99 - ms
 * @property {number} max - ms
 * @property {number} queries - database queries during the run, fleet-wide
 * @property {Record<string, number>} cache - the run's change in every stampede counter, fleet-wide
 */

/** @param {number[]} sorted @param {number} q */
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

/**
 * Sends `rate` requests per second for `seconds` at `/api/bookmarks/count?steady=<variant>`, spread
 * over the replicas in turn, after resetting the key and reading it once (so the run starts warm
 * and every slow request in it is an expiry's).
 * @param {ReturnType<import('./fleet.mjs').createFleet>} fleet
 * @param {() => Promise<void>} reset - invalidates the steady key on every replica
 * @param {{ variant: string, rate: number, seconds: number, lock: boolean, failSafe: boolean }} options
 * @returns {Promise<SteadyResult>}
 */
export async function runSteady(fleet, reset, { variant, rate, seconds, lock, failSafe }) {
  const targets = fleet.urls();
  const query = `steady=${variant}&lock=${lock ? 1 : 0}&failsafe=${failSafe ? 1 : 0}`;
  await reset();
  await get(`${targets[0]}/api/bookmarks/count?${query}`).catch(() => undefined);
  const before = fleetTotal(await fleet.replicas());
  const n = rate * seconds;
  const interval = 1_000 / rate;
  /** @type {[number, number, number][]} */
  const samples = new Array(n);
  /** @type {Promise<void>[]} */
  const pending = [];
  const started = performance.now();
  const fire = (/** @type {number} */ i) => {
    const sent = performance.now();
    const url = `${targets[i % targets.length]}/api/bookmarks/count?${query}`;
    pending.push(
      get(url).then(
        ({ status, body }) => {
          const ok = status === 200 && typeof JSON.parse(body).count === 'number';
          samples[i] = [Math.round(sent - started), round(performance.now() - sent), ok ? 1 : 0];
        },
        () => {
          samples[i] = [Math.round(sent - started), round(performance.now() - sent), 0];
        },
      ),
    );
  };
  // Each request leaves at its own time whatever the others do (an open-loop load): a slow answer
  // never delays the requests behind it, as with real independent clients.
  for (let i = 0; i < n; ) {
    const elapsed = performance.now() - started;
    while (i < n && i * interval <= elapsed) fire(i++);
    if (i < n) await sleep(Math.max(1, Math.min(5, i * interval - elapsed)));
  }
  await Promise.all(pending);
  const after = fleetTotal(await fleet.replicas());
  const latencies = samples.map((s) => s[1]).sort((a, b) => a - b);
  return {
    variant,
    rate,
    seconds,
    n,
    lock,
    failSafe,
    samples,
    errors: samples.filter((s) => s[2] === 0).length,
    slow: latencies.filter((ms) => ms > SLOW_MS).length,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    max: latencies.at(-1) ?? 0,
    queries: after.db.queries - before.db.queries,
    cache: Object.fromEntries(STAT_NAMES.map((name) => [name, after.cache[name] - before.cache[name]])),
  };
}

/** @param {number} ms */
const round = (ms) => Math.round(ms * 100) / 100;
