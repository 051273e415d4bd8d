// The HTTP routes of one replica.
import { Hono } from 'hono';
import { HERD_MAX } from './config.mjs';
import { fleetTotal } from './fleet.mjs';
import { runHerd } from './herd.mjs';
import { renderPage } from './page.mjs';

/**
 * @param {string | undefined} text
 * @param {boolean} fallback
 * @returns {boolean | undefined} undefined when `text` is neither 0 nor 1
 */
function bit(text, fallback) {
  if (text === undefined || text === '') return fallback;
  return text === '1' ? true : text === '0' ? false : undefined;
}

/**
 * @param {object} deps
 * @param {import('./config.mjs').Config} deps.config
 * @param {import('./bookmarks.mjs').BookmarkCounter} deps.counter
 * @param {ReturnType<import('./fleet.mjs').createFleet>} deps.fleet
 * @param {() => import('./metrics.mjs').Snapshot} deps.local
 * @param {ReturnType<import('./metrics.mjs').createPrometheus>} deps.prometheus
 * @param {string} deps.cacheDescription
 */
export function createApp({ config, counter, fleet, local, prometheus, cacheDescription }) {
  const app = new Hono();
  let herdRunning = false;
  /** @type {import('./herd.mjs').HerdResult | undefined} */
  let lastHerd;

  /** @param {string | undefined} protect @param {string | undefined} lock */
  const mode = (protect, lock) => {
    const p = bit(protect, true);
    const l = bit(lock, config.lock);
    if (p === undefined || l === undefined) return undefined;
    return { protect: p, lock: p && l && config.cache === 'redis' };
  };

  app.get('/', (c) =>
    c.html(
      renderPage({
        replicas: config.replicas,
        cache: cacheDescription,
        redis: config.cache === 'redis',
        lock: config.lock,
        ttl: config.cacheTtl,
        swr: config.cacheSwr,
        latencyMs: config.dbLatencyMs,
        pool: config.dbPool,
        rows: local().db.rows,
        herdMax: HERD_MAX,
      }),
    ),
  );

  app.get('/api/bookmarks/count', async (c) => {
    const m = mode(c.req.query('protect'), c.req.query('lock'));
    if (m === undefined) return c.json({ error: 'protect and lock must be 0 or 1' }, 400);
    const count = m.protect
      ? await counter.protectedCount({ lock: m.lock })
      : await counter.unprotectedCount();
    return c.json({ count, protect: m.protect, lock: m.lock, replica: config.replicaId });
  });

  app.post('/api/invalidate', async (c) => {
    if (c.req.query('scope') === 'local') await counter.invalidateAll();
    else await fleet.invalidateEverywhere(() => counter.invalidateAll());
    return c.json({ invalidated: true, replicas: fleet.urls().length });
  });

  app.post('/api/herd', async (c) => {
    const text = c.req.query('n') ?? '500';
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1 || n > HERD_MAX) {
      return c.json({ error: `n must be an integer from 1 to ${HERD_MAX}; got '${text}'` }, 400);
    }
    const m = mode(c.req.query('protect'), c.req.query('lock'));
    if (m === undefined) return c.json({ error: 'protect and lock must be 0 or 1' }, 400);
    if (herdRunning) return c.json({ error: 'a herd is already running; try again when it is done' }, 409);
    herdRunning = true;
    try {
      lastHerd = await runHerd(fleet, () => counter.invalidateAll(), { n, ...m });
      return c.json(lastHerd);
    } finally {
      herdRunning = false;
    }
  });

  app.get('/api/fleet', async (c) => {
    const replicas = await fleet.replicas();
    return c.json({ replicas, total: fleetTotal(replicas), lastHerd });
  });

  app.get('/healthz', (c) => c.text('ok'));

  app.get('/actuator/metrics', (c) => c.json(local()));

  app.get('/actuator/prometheus', async (c) =>
    c.body(await prometheus.text(), 200, { 'content-type': prometheus.contentType }),
  );

  app.onError((error, c) => {
    console.error(`[replica ${config.replicaId}] ${c.req.method} ${c.req.path} failed:`, error);
    return c.json({ error: error instanceof Error ? error.message : String(error) }, 500);
  });

  return app;
}
