// The HTTP routes of one replica.
import { Hono } from 'hono';
import { FAIL_SAFE, SOFT_TIMEOUT, STEADY_TTL, STEADY_VARIANTS, UPDATE_INVALIDATION } from './bookmarks.mjs';
import { HERD_MAX } from './config.mjs';
import { OUTAGES } from './db.mjs';
import { fleetTotal } from './fleet.mjs';
import { runHerd } from './herd.mjs';
import { renderPage } from './page.mjs';
import { runSteady, STEADY_MAX_RATE, STEADY_MAX_SECONDS } from './steady.mjs';

/** How long `POST /api/update` waits for every replica to serve the new count. */
const PROPAGATION_LIMIT_MS = 3_000;

/**
 * @param {string | undefined} text
 * @param {boolean} fallback
 * @returns {boolean | undefined} undefined when `text` is neither 0 nor 1
 */
function bit(text, fallback) {
  if (text === undefined || text === '') return fallback;
  return text === '1' ? true : text === '0' ? false : undefined;
}

/** @param {string} name @param {string | undefined} text */
const badBit = (name, text) => `${name} must be 0 or 1; got '${text}'`;

/**
 * `scope=local`: act on this replica only (what replicas ask of each other); absent: on every replica.
 * @param {string | undefined} text
 * @returns {'local' | 'fleet' | undefined} undefined when `text` is neither
 */
function scopeOf(text) {
  if (text === undefined || text === '') return 'fleet';
  return text === 'local' ? 'local' : undefined;
}

/** @param {string | undefined} text */
const badScope = (text) => `scope must be local (this replica only) or absent (every replica); got '${text}'`;

/**
 * @param {object} deps
 * @param {import('./config.mjs').Config} deps.config
 * @param {import('./bookmarks.mjs').BookmarkCounter} deps.counter
 * @param {ReturnType<import('./fleet.mjs').createFleet>} deps.fleet
 * @param {import('./db.mjs').BookmarkDb} deps.db
 * @param {() => import('./metrics.mjs').Snapshot} deps.local
 * @param {ReturnType<import('./metrics.mjs').createPrometheus>} deps.prometheus
 * @param {string} deps.cacheDescription
 * @param {import('./load-slot.mjs').LoadSlot} deps.loadSlot - one herd or steady load at a time, fleet-wide
 */
export function createApp({ config, counter, db, fleet, local, prometheus, cacheDescription, loadSlot }) {
  const app = new Hono();
  /** @type {import('./herd.mjs').HerdResult | undefined} */
  let lastHerd;
  const BAD_BITS = 'protect, lock and failsafe must be 0 or 1';

  /**
   * @param {string | undefined} protect @param {string | undefined} lock @param {string | undefined} failSafe
   */
  const mode = (protect, lock, failSafe) => {
    const p = bit(protect, true);
    const l = bit(lock, config.lock);
    const f = bit(failSafe, false);
    if (p === undefined || l === undefined || f === undefined) return undefined;
    return { protect: p, lock: p && l && config.cache === 'redis', failSafe: p && f };
  };

  /**
   * Runs `load` unless another herd or steady load is running anywhere in the fleet (409): each
   * measures the whole fleet's counters, so two at once would count each other's requests.
   * @param {import('hono').Context} c
   * @param {import('./load-slot.mjs').LoadKind} what
   * @param {() => Promise<unknown>} load
   */
  const exclusive = async (c, what, load) => {
    const slot = await loadSlot.take(what);
    if ('busy' in slot) {
      const where = slot.busy.replica === 0 ? '' : ` on replica ${slot.busy.replica}`;
      return c.json(
        { error: `a ${slot.busy.what} is already running${where}; try again when it is done` },
        409,
      );
    }
    try {
      return c.json(await load());
    } finally {
      slot.release();
    }
  };

  /**
   * Expires a key for a load during an outage. A shared cache (Redis) is written once, here: every
   * replica then reads the same expired value (replicas writing it each at once could leave one
   * with an entry older than its own write, which fail-safe would refuse). Memory caches are each
   * replica's own, so each expires its own.
   * @param {string} query - extra query string for the peers (`&steady=...`)
   * @param {() => Promise<void>} local
   */
  const expireEverywhere = (query, local) =>
    config.cache === 'redis'
      ? local()
      : fleet.everywhere(`/api/invalidate?scope=local&expire=1${query}`, local);

  app.get('/', (c) =>
    c.html(
      renderPage({
        replicas: config.replicas,
        cache: cacheDescription,
        redis: config.cache === 'redis',
        lock: config.lock,
        ttl: config.cacheTtl,
        swr: config.cacheSwr,
        failSafe: { ...FAIL_SAFE, softTimeout: SOFT_TIMEOUT },
        steady: {
          ttl: STEADY_TTL,
          variants: [...STEADY_VARIANTS],
          maxRate: STEADY_MAX_RATE,
          maxSeconds: STEADY_MAX_SECONDS,
        },
        outage: db.stats().outage,
        invalidation: UPDATE_INVALIDATION,
        latencyMs: config.dbLatencyMs,
        pool: config.dbPool,
        rows: local().db.rows,
        herdMax: HERD_MAX,
      }),
    ),
  );

  app.get('/api/bookmarks/count', async (c) => {
    const m = mode(c.req.query('protect'), c.req.query('lock'), c.req.query('failsafe'));
    if (m === undefined) return c.json({ error: BAD_BITS }, 400);
    const steady = c.req.query('steady');
    if (steady !== undefined && !STEADY_VARIANTS.includes(/** @type {never} */ (steady))) {
      return c.json({ error: `steady must be one of ${STEADY_VARIANTS.join(', ')}; got '${steady}'` }, 400);
    }
    const variant = /** @type {import('./bookmarks.mjs').SteadyVariant | undefined} */ (steady);
    const count =
      m.protect || variant !== undefined
        ? await counter.protectedCount({ lock: m.lock, failSafe: m.failSafe, steady: variant })
        : await counter.unprotectedCount();
    return c.json({ count, ...m, replica: config.replicaId });
  });

  app.post('/api/invalidate', async (c) => {
    const expire = bit(c.req.query('expire'), false);
    if (expire === undefined) return c.json({ error: badBit('expire', c.req.query('expire')) }, 400);
    const tag = bit(c.req.query('tag'), false);
    if (tag === undefined) return c.json({ error: badBit('tag', c.req.query('tag')) }, 400);
    const scope = scopeOf(c.req.query('scope'));
    if (scope === undefined) return c.json({ error: badScope(c.req.query('scope')) }, 400);
    const steady = /** @type {import('./bookmarks.mjs').SteadyVariant | undefined} */ (c.req.query('steady'));
    if (steady !== undefined && !STEADY_VARIANTS.includes(steady)) {
      return c.json({ error: `steady must be one of ${STEADY_VARIANTS.join(', ')}; got '${steady}'` }, 400);
    }
    // A tag invalidation drops every tagged key at once: neither expiring nor a single key applies.
    if (tag && (expire || steady !== undefined)) {
      return c.json({ error: 'tag=1 cannot be combined with expire=1 or steady' }, 400);
    }
    /** @type {() => Promise<void>} */
    let action;
    if (tag) action = () => counter.invalidateTagged();
    else if (steady === undefined)
      action = expire ? () => counter.expireAll() : () => counter.invalidateAll();
    else action = expire ? () => counter.expireSteady(steady) : () => counter.invalidateSteady(steady);
    const which = tag ? '&tag=1' : steady === undefined ? '' : `&steady=${steady}`;
    if (scope === 'local') await action();
    else if (expire) await expireEverywhere(which, action);
    else await fleet.everywhere(`/api/invalidate?scope=local${which}`, action);
    return c.json({ invalidated: true, replicas: fleet.urls().length });
  });

  app.post('/api/herd', (c) => {
    const text = c.req.query('n') ?? '500';
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1 || n > HERD_MAX) {
      return c.json({ error: `n must be an integer from 1 to ${HERD_MAX}; got '${text}'` }, 400);
    }
    const m = mode(c.req.query('protect'), c.req.query('lock'), c.req.query('failsafe'));
    if (m === undefined) return c.json({ error: BAD_BITS }, 400);
    return exclusive(c, 'herd', async () => {
      // During an outage the herd expires the count rather than deleting it, so that fail-safe has
      // the last good value to answer with (it never brings back an invalidated one).
      const how = db.stats().outage === 'off' ? 'invalidate' : 'expire';
      const run =
        how === 'expire'
          ? () => expireEverywhere('', () => counter.expireAll())
          : () => fleet.invalidateEverywhere(() => counter.invalidateAll());
      lastHerd = await runHerd(fleet, { how, run }, { n, ...m });
      return lastHerd;
    });
  });

  app.post('/api/steady', (c) => {
    const variant = c.req.query('variant') ?? 'plain';
    if (!STEADY_VARIANTS.includes(/** @type {never} */ (variant))) {
      return c.json({ error: `variant must be one of ${STEADY_VARIANTS.join(', ')}; got '${variant}'` }, 400);
    }
    const rateText = c.req.query('rate') ?? '200';
    const rate = Number(rateText);
    if (!Number.isInteger(rate) || rate < 1 || rate > STEADY_MAX_RATE) {
      return c.json(
        { error: `rate must be an integer from 1 to ${STEADY_MAX_RATE}; got '${rateText}'` },
        400,
      );
    }
    const secondsText = c.req.query('seconds') ?? '10';
    const seconds = Number(secondsText);
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > STEADY_MAX_SECONDS) {
      return c.json(
        { error: `seconds must be an integer from 1 to ${STEADY_MAX_SECONDS}; got '${secondsText}'` },
        400,
      );
    }
    const m = mode('1', c.req.query('lock'), c.req.query('failsafe'));
    if (m === undefined) return c.json({ error: BAD_BITS }, 400);
    const steady = /** @type {import('./bookmarks.mjs').SteadyVariant} */ (variant);
    return exclusive(c, 'steady load', () => {
      // As for a herd: during an outage the key is expired, not deleted, to leave fail-safe its value.
      const expire = db.stats().outage !== 'off';
      const reset = expire
        ? () => expireEverywhere(`&steady=${variant}`, () => counter.expireSteady(steady))
        : () =>
            fleet.everywhere(`/api/invalidate?scope=local&steady=${variant}`, () =>
              counter.invalidateSteady(steady),
            );
      return runSteady(fleet, reset, { variant, rate, seconds, lock: m.lock, failSafe: m.failSafe });
    });
  });

  app.post('/api/outage', async (c) => {
    const outage = c.req.query('mode') ?? '';
    if (!OUTAGES.includes(/** @type {never} */ (outage))) {
      return c.json({ error: `mode must be one of ${OUTAGES.join(', ')}; got '${outage}'` }, 400);
    }
    const scope = scopeOf(c.req.query('scope'));
    if (scope === undefined) return c.json({ error: badScope(c.req.query('scope')) }, 400);
    const set = () => db.setOutage(/** @type {import('./db.mjs').Outage} */ (outage));
    if (scope === 'local') set();
    else await fleet.everywhere(`/api/outage?scope=local&mode=${outage}`, set);
    return c.json({ outage, replicas: fleet.urls().length });
  });

  // A write, then a tag invalidation on this replica only: with Redis (and the tiered cache's bus)
  // that reaches the whole fleet; replicas with their own memory caches are told one by one. Then every
  // replica is asked for the count until it serves the new one.
  app.post('/api/update', async (c) => {
    const started = performance.now();
    const count = await counter.update();
    if (config.cache === 'memory') {
      await fleet.everywhere('/api/invalidate?scope=local&tag=1', () => undefined);
    }
    const invalidatedMs = round(performance.now() - started);
    const replicas = await fleet.untilServed(count, PROPAGATION_LIMIT_MS);
    return c.json({
      count,
      invalidatedMs,
      replicas,
      allServeNewCount: replicas.every((r) => r.count === count),
    });
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

/** @param {number} ms */
const round = (ms) => Math.round(ms * 100) / 100;
