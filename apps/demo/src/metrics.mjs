// What a replica reports: /actuator/metrics (JSON) and /actuator/prometheus (text).
import { stats, statsByCache } from '@stampede/core';
import { registerStampedeMetrics } from '@stampede/metrics';
import { Counter, Registry } from 'prom-client';

/**
 * @typedef {object} Snapshot
 * @property {number} replica - 0 for a single process, 1..n in replica mode
 * @property {import('@stampede/core').StampedeStats} cache - summed over every cache
 * @property {Record<string, import('@stampede/core').StampedeStats>} caches - per cache name
 * @property {boolean} tiered - the cache is an L1 in front of Redis (`cache.l1Hits`, `l2Hits`, `busEvictions` and `busRecoveries` count)
 * @property {import('./db.mjs').DbStats} db
 * @property {{ protected: number, unprotected: number, steady: number, lastServed: number | null }} requests -
 *   /api/bookmarks/count calls, and the count the protected path last answered (null before its first answer)
 */

/**
 * @param {number} replica
 * @param {import('./db.mjs').BookmarkDb} db
 * @param {import('./bookmarks.mjs').BookmarkCounter} counter
 * @param {boolean} tiered
 * @returns {Snapshot}
 */
export function snapshot(replica, db, counter, tiered) {
  return {
    replica,
    cache: stats(),
    caches: statsByCache(),
    tiered,
    db: db.stats(),
    requests: counter.requests(),
  };
}

/**
 * A dedicated prom-client registry with stampede's metrics and the demo's query counter.
 * @param {number} replica
 * @param {import('./db.mjs').BookmarkDb} db
 */
export function createPrometheus(replica, db) {
  const registry = new Registry();
  if (replica > 0) registry.setDefaultLabels({ replica: String(replica) });
  const stampede = registerStampedeMetrics({ registry, prefix: 'stampede_' });
  let reported = 0;
  new Counter({
    name: 'demo_db_queries_total',
    help: 'Queries the demo ran against its SQLite database.',
    registers: [registry],
    collect() {
      const { queries } = db.stats();
      this.inc(queries - reported);
      reported = queries;
    },
  });
  return {
    contentType: registry.contentType,
    text: () => registry.metrics(),
    close: () => stampede.unregister(),
  };
}
