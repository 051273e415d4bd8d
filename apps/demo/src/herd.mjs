// A herd: N concurrent requests at a just-invalidated key, over real HTTP, spread across the fleet.
import { Agent, request } from 'node:http';
import { fleetTotal } from './fleet.mjs';

// Keep-alive sockets, as many as the herd needs: the herd comes from clients already connected.
const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY, maxFreeSockets: 4_096 });

/**
 * One GET over the keep-alive agent (node:http is much cheaper per request than fetch, which
 * keeps the herd a burst rather than a trickle).
 * @param {string} url
 * @returns {Promise<{ status: number, body: string }>}
 */
export function get(url) {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', (error) => {
      // A kept-alive socket the server closed as idle (its keepAliveTimeout, 5 s) just as this
      // request went out on it: the request never reached the server, so it is sent once more, on a
      // new socket (the retry Node's http documentation gives for `reusedSocket`).
      const code = /** @type {NodeJS.ErrnoException} */ (error).code;
      if (req.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE')) get(url).then(resolve, reject);
      else reject(error);
    });
    req.end();
  });
}

/**
 * @typedef {object} HerdResult
 * @property {number} n - requests fired
 * @property {boolean} protect
 * @property {boolean} lock
 * @property {number} queries - database queries the herd caused, fleet-wide
 * @property {number} fills - fill functions run, fleet-wide
 * @property {number} coalescedWaits
 * @property {number} lockWaitHits - lock losers that got another replica's value
 * @property {number} hits
 * @property {number} staleHits - answers with an old count (stale-while-revalidate or fail-safe)
 * @property {number} fillFailures - fills that failed (the database outage)
 * @property {number} failSafeActivations - failed fills whose callers got the last good count instead
 * @property {number} softTimeouts - fills that answered with the last good count while still running
 * @property {boolean} failSafe
 * @property {'invalidate' | 'expire'} reset - how the key was made to miss before the herd
 * @property {number} errors - requests that did not answer 200 with the count
 * @property {number} ms - wall time of the herd
 * @property {{ replica: number, url: string, requests: number, queries: number, fills: number }[]} replicas
 */

/**
 * @param {ReturnType<import('./fleet.mjs').createFleet>} fleet
 * @param {{ how: 'invalidate' | 'expire', run: () => Promise<void> }} reset - makes the key miss on every replica
 * @param {{ n: number, protect: boolean, lock: boolean, failSafe: boolean }} options
 * @returns {Promise<HerdResult>}
 */
export async function runHerd(fleet, reset, { n, protect, lock, failSafe }) {
  const targets = fleet.urls();
  // A herd on a hot key comes from clients that are already connected: open the N keep-alive
  // connections first, so the herd itself arrives as one burst.
  await Promise.all(
    Array.from({ length: n }, (_, i) => get(`${targets[i % targets.length]}/healthz`).catch(() => undefined)),
  );
  await reset.run();
  const before = await fleet.replicas();
  const query = `protect=${protect ? 1 : 0}&lock=${lock ? 1 : 0}&failsafe=${failSafe ? 1 : 0}`;
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      try {
        const { status, body } = await get(`${targets[i % targets.length]}/api/bookmarks/count?${query}`);
        return status === 200 && typeof JSON.parse(body).count === 'number';
      } catch {
        return false;
      }
    }),
  );
  const ms = Math.round(performance.now() - started);
  const after = await fleet.replicas();
  const [was, is] = [fleetTotal(before), fleetTotal(after)];
  const delta = (/** @type {string} */ name) => is.cache[name] - was.cache[name];
  return {
    n,
    protect,
    lock,
    failSafe,
    reset: reset.how,
    queries: is.db.queries - was.db.queries,
    fills: delta('fills'),
    coalescedWaits: delta('coalescedWaits'),
    lockWaitHits: delta('lockWaitHits'),
    hits: delta('hits'),
    staleHits: delta('staleHits'),
    fillFailures: delta('fillFailures'),
    failSafeActivations: delta('failSafeActivations'),
    softTimeouts: delta('softTimeouts'),
    errors: answers.filter((ok) => !ok).length,
    ms,
    replicas: after.map((view, i) => {
      const old = before[i]?.metrics;
      const now = view.metrics;
      const requests = (/** @type {typeof now} */ m) =>
        m ? m.requests.protected + m.requests.unprotected + m.requests.steady : 0;
      return {
        replica: view.replica,
        url: view.url,
        requests: requests(now) - requests(old),
        queries: (now?.db.queries ?? 0) - (old?.db.queries ?? 0),
        fills: (now?.cache.fills ?? 0) - (old?.cache.fills ?? 0),
      };
    }),
  };
}
