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

  /** Invalidates the key on every replica (a Redis delete is fleet-wide, in-process flights are not). */
  async function invalidateEverywhere(/** @type {() => Promise<void>} */ invalidateLocal) {
    const self = selfUrl();
    await Promise.all(
      urls().map(async (url) => {
        if (url === self) return invalidateLocal();
        const response = await fetch(`${url}/api/invalidate?scope=local`, {
          method: 'POST',
          signal: AbortSignal.timeout(PEER_TIMEOUT_MS),
        });
        if (!response.ok) throw new Error(`invalidate on ${url} failed: HTTP ${response.status}`);
      }),
    );
  }

  return { urls, replicas, invalidateEverywhere };
}

/**
 * Sums the replicas' counters.
 * @param {ReplicaView[]} views
 */
export function fleetTotal(views) {
  /** @type {Record<string, number>} */
  const cache = Object.fromEntries(STAT_NAMES.map((name) => [name, 0]));
  const total = { cache, db: { queries: 0 }, requests: { protected: 0, unprotected: 0 } };
  for (const { metrics } of views) {
    if (metrics === undefined) continue;
    for (const name of STAT_NAMES) cache[name] += metrics.cache[name];
    total.db.queries += metrics.db.queries;
    total.requests.protected += metrics.requests.protected;
    total.requests.unprotected += metrics.requests.unprotected;
  }
  return total;
}
