// The replicas this process knows of (just itself unless started by the supervisor), and their
// metrics summed into a fleet view.
import { STAT_NAMES } from '@stampede/core';

const PEER_TIMEOUT_MS = 2_000;

/**
 * @typedef {object} ReplicaView
 * @property {number} replica
 * @property {string} url
 * @property {boolean} up
 * @property {import('./metrics.mjs').Snapshot | undefined} metrics
 */

/**
 * @param {{ selfUrl: () => string, peers: () => string[], local: () => import('./metrics.mjs').Snapshot }} options
 */
export function createFleet({ selfUrl, peers, local }) {
  /** @returns {string[]} every replica's base URL, this one included */
  const urls = () => {
    const list = peers();
    return list.length > 0 ? list : [selfUrl()];
  };

  /** @returns {Promise<ReplicaView[]>} */
  async function replicas() {
    const self = selfUrl();
    return Promise.all(
      urls().map(async (url, index) => {
        if (url === self) return { replica: local().replica, url, up: true, metrics: local() };
        try {
          const response = await fetch(`${url}/actuator/metrics`, {
            signal: AbortSignal.timeout(PEER_TIMEOUT_MS),
          });
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          const metrics = /** @type {import('./metrics.mjs').Snapshot} */ (await response.json());
          return { replica: metrics.replica, url, up: true, metrics };
        } catch {
          return { replica: index + 1, url, up: false, metrics: undefined };
        }
      }),
    );
  }

  /**
   * Runs an action on every replica: `runLocal` here, `POST path` (which must run it with
   * `scope=local`) on the others.
   * @param {string} path - e.g. `/api/invalidate?scope=local`
   * @param {() => Promise<unknown> | unknown} runLocal
   */
  async function everywhere(path, runLocal) {
    const self = selfUrl();
    await Promise.all(
      urls().map(async (url) => {
        if (url === self) return runLocal();
        const response = await fetch(`${url}${path}`, {
          method: 'POST',
          signal: AbortSignal.timeout(PEER_TIMEOUT_MS),
        });
        if (!response.ok) throw new Error(`POST ${path} on ${url} failed: HTTP ${response.status}`);
      }),
    );
  }

  /** Invalidates the key on every replica (a Redis delete is fleet-wide, in-process flights are not). */
  const invalidateEverywhere = (/** @type {() => Promise<void>} */ invalidateLocal) =>
    everywhere('/api/invalidate?scope=local', invalidateLocal);

  /**
   * Asks every replica for the bookmark count until it answers `count` or `limitMs` passes.
   * @param {number} count
   * @param {number} limitMs
   * @returns {Promise<{ replica: number, url: string, count: number | undefined, error?: string, ms: number }[]>}
   *   per replica, its last answer and how long it took to serve `count`
   */
  function untilServed(count, limitMs) {
    const all = urls();
    return Promise.all(
      all.map(async (url, index) => {
        const asked = performance.now();
        for (;;) {
          /** @type {{ count?: number, replica?: number, error?: string }} */
          let body;
          try {
            const response = await fetch(`${url}/api/bookmarks/count`, {
              signal: AbortSignal.timeout(limitMs),
            });
            body = await response.json();
          } catch (error) {
            body = { error: error instanceof Error ? error.message : String(error) };
          }
          const ms = Math.round((performance.now() - asked) * 100) / 100;
          if (body.count === count || ms > limitMs) {
            const replica = body.replica ?? (all.length > 1 ? index + 1 : local().replica);
            return { replica, url, count: body.count, error: body.error, ms };
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }),
    );
  }

  return { urls, replicas, everywhere, invalidateEverywhere, untilServed };
}

/**
 * Sums the replicas' counters.
 * @param {ReplicaView[]} views
 */
export function fleetTotal(views) {
  /** @type {Record<string, number>} */
  const cache = Object.fromEntries(STAT_NAMES.map((name) => [name, 0]));
  const total = {
    cache,
    db: { queries: 0, failedQueries: 0, writes: 0 },
    requests: { protected: 0, unprotected: 0, steady: 0 },
  };
  for (const { metrics } of views) {
    if (metrics === undefined) continue;
    for (const name of STAT_NAMES) cache[name] += metrics.cache[name] ?? 0;
    total.db.queries += metrics.db.queries;
    total.db.failedQueries += metrics.db.failedQueries;
    total.db.writes += metrics.db.writes;
    total.requests.protected += metrics.requests.protected;
    total.requests.unprotected += metrics.requests.unprotected;
    total.requests.steady += metrics.requests.steady;
  }
  return total;
}
