// The page at `/`: plain HTML, one inline stylesheet and one inline script. Nothing is fetched
// from the network but this server's own JSON.
import { readFileSync } from 'node:fs';

const SCRIPT = readFileSync(new URL('./page-script.js', import.meta.url), 'utf8');
const STYLE = readFileSync(new URL('./page.css', import.meta.url), 'utf8');

/** @param {string} text */
function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * @param {object} view
 * @param {number} view.replicas
 * @param {string} view.cache
 * @param {boolean} view.redis
 * @param {boolean} view.lock
 * @param {string} view.ttl
 * @param {string | undefined} view.swr
 * @param {number} view.latencyMs
 * @param {number} view.pool
 * @param {number} view.rows
 * @param {number} view.herdMax
 * @param {{ maxStale: string, throttle: string, softTimeout: string }} view.failSafe
 * @param {{ ttl: string, variants: string[], maxRate: number, maxSeconds: number }} view.steady
 * @param {string} view.outage
 * @param {string} view.invalidation - the call the update makes, as code
 */
export function renderPage(view) {
  const settings = JSON.stringify(view).replace(/</g, '\\u003c');
  const lockButton = view.redis
    ? `<button type="button" id="herd-nolock" data-testid="herd-nolock" data-protect="1" data-lock="0" class="amber">stampede, no fill lock</button>`
    : '';
  const lockResult = view.redis ? resultRow('nolock', 'stampede, no fill lock', 'amber') : '';
  const fleet = view.replicas > 1 ? `${view.replicas} replicas` : 'one process';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stampede demo: the herd and its cure</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>stampede <span>the herd and its cure, live</span></h1>
  <p class="setup" data-testid="setup">GET /api/bookmarks/count runs <code>SELECT COUNT(*) FROM bookmarks</code>
  on ${view.rows.toLocaleString('en-US')} SQLite rows (${view.latencyMs} ms round trip, pool of ${view.pool}) ·
  ${escapeHtml(view.cache)} · TTL ${escapeHtml(view.ttl)} · SWR ${escapeHtml(view.swr ?? 'off')} · ${fleet}</p>
</header>
<main>
<section class="counters" aria-label="live counters">
  ${counter('requests', 'requests')}
  ${counter('queries', 'database queries', 'red')}
  ${counter('fills', 'fills', 'green')}
  ${counter('coalesced', 'coalesced waits')}
  ${counter('hits', 'hits')}
  ${counter('stale', 'stale served')}
  ${view.redis ? counter('lockwaits', 'lock-wait hits') : ''}
  ${counter('failsafe', 'fail-safe activations', 'amber')}
  ${counter('dberrors', 'failed queries', 'red')}
</section>
<section class="herd panel">
  <h2>Fire a herd at an expired key</h2>
  <p class="explain">Invalidates <code>bookmark_count</code> (during a database outage: expires it, keeping
  the last good count for fail-safe), then sends
  <input id="herd-n" data-testid="herd-n" type="number" min="1" max="${view.herdMax}" value="500" aria-label="requests in the herd">
  concurrent HTTP requests${view.replicas > 1 ? ', spread across the replicas' : ''}.</p>
  <div class="buttons">
    <button type="button" id="herd-unprotected" data-testid="herd-unprotected" data-protect="0" data-lock="0" class="red">no protection</button>
    ${lockButton}
    <button type="button" id="herd-protected" data-testid="herd-protected" data-protect="1" data-lock="1" class="green">stampede</button>
  </div>
  <label class="toggle"><input type="checkbox" id="failsafe" data-testid="failsafe"> fail-safe on the stampede buttons:
  <code>failSafe: { maxStale: '${escapeHtml(view.failSafe.maxStale)}', throttle: '${escapeHtml(view.failSafe.throttle)}' }, softTimeout: '${escapeHtml(view.failSafe.softTimeout)}'</code></label>
  <p id="herd-status" data-testid="herd-status" class="status" role="status">Pick a herd.</p>
  <div class="results">
    ${resultRow('unprotected', 'no protection (cache-aside)', 'red')}
    ${lockResult}
    ${resultRow('protected', view.redis ? 'stampede + fill lock' : 'stampede (getOrCompute)', 'green')}
  </div>
</section>
<section class="chart panel">
  <h2>Per second, fleet-wide <span class="legend"><i class="k-req"></i>requests <i class="k-q"></i>queries <i class="k-f"></i>fills</span></h2>
  <svg id="chart" data-testid="chart" viewBox="0 0 560 230" role="img" aria-label="requests, queries and fills per second over the last minute"></svg>
</section>
<section class="outage panel">
  <h2>Database outage</h2>
  <p class="explain">Every <code>COUNT(*)</code> on every replica fails after its round trip (<i>errors</i>), or hangs
  until the outage ends or 5 s pass (<i>stalls</i>). Fire a herd: without fail-safe the requests get errors; with
  it they get the last good count, served stale, and the database is tried again at most once per
  ${escapeHtml(view.failSafe.throttle)} per replica (once fleet-wide with the fill lock). A stalled query answers
  with the last good count after the ${escapeHtml(view.failSafe.softTimeout)} soft timeout. During an outage, herds
  and steady loads expire the count (its TTL lapses now) instead of deleting it.</p>
  <div class="buttons outage-buttons" role="radiogroup" aria-label="database outage">
    <button type="button" class="switch" data-outage="off" data-testid="outage-off">database up</button>
    <button type="button" class="switch" data-outage="error" data-testid="outage-error">outage: errors</button>
    <button type="button" class="switch" data-outage="stall" data-testid="outage-stall">outage: stalls</button>
  </div>
  <p id="outage-status" data-testid="outage-status" class="status" data-outage="${escapeHtml(view.outage)}" role="status">Database up.</p>
</section>
<section class="update panel">
  <h2>Update the data</h2>
  <p class="explain">Adds a bookmark row (a write to SQLite), then runs <code>${escapeHtml(view.invalidation)}</code> on this
  replica only${view.replicas > 1 ? (view.redis ? '; Redis carries it to the others' : '; each replica has its own memory cache, so the others are told over HTTP') : ''}. Then asks
  every replica for the count until it serves the new one.</p>
  <div class="buttons"><button type="button" id="update" data-testid="update" class="green">update: add a bookmark</button></div>
  <p id="update-status" data-testid="update-status" class="status" role="status">No update yet.</p>
</section>
<section class="steady panel">
  <h2>Steady load across expiries <span class="legend" id="steady-legend"></span></h2>
  <p class="explain">Sends
  <input id="steady-rate" data-testid="steady-rate" type="number" min="1" max="${view.steady.maxRate}" value="200" aria-label="requests per second"> requests/s for
  <input id="steady-seconds" data-testid="steady-seconds" type="number" min="1" max="${view.steady.maxSeconds}" value="10" aria-label="seconds"> s at a key with a
  ${escapeHtml(view.steady.ttl)} TTL${view.replicas > 1 ? ', spread across the replicas' : ''}, and plots every request's latency. With a TTL
  only, each expiry makes the readers that arrive during the refill wait for it; stale-while-revalidate serves
  the old count and refreshes in the background; early refresh (<code>earlyRefresh: true</code>, XFetch) refreshes
  in the background before the expiry, so the count never expires in front of its readers.</p>
  <div class="buttons steady-buttons">
    ${view.steady.variants.map((v) => `<button type="button" data-variant="${v}" data-testid="steady-${v}" class="variant-${v}">${STEADY_LABELS[v] ?? v}</button>`).join('\n    ')}
  </div>
  <p id="steady-status" data-testid="steady-status" class="status" role="status">Pick a variant.</p>
  <svg id="steady-chart" data-testid="steady-chart" viewBox="0 0 1160 240" role="img" aria-label="latency of every request of the steady load"></svg>
  <table class="steady-table"><thead><tr><th>variant</th><th>requests</th><th>slower than 50 ms</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>fills</th><th>refreshes</th><th>errors</th></tr></thead>
  <tbody id="steady-results" data-testid="steady-results"></tbody></table>
</section>
<section class="about panel">
  <h2>What you are looking at</h2>
  <p><b class="t-red">No protection</b>: plain cache-aside. Every request that finds the key missing runs the
  query itself, so a herd arriving at an expired key becomes a herd of database queries.
  <b class="t-green">stampede</b>: <code>getOrCompute</code> lets the first miss run the query; the other
  requests on this process wait for that one result (<i>coalesced waits</i>) and later ones are <i>hits</i>.${
    view.redis
      ? ` Across replicas, the distributed fill lock makes the other replicas wait for the winner's value
  (<i>lock-wait hits</i>): one fill fleet-wide; without it, up to one fill per replica. Each replica reads
  through a tiered cache: an in-process memory L1 in front of Redis. An <i>L1 hit</i> costs no Redis
  command; an <i>L2 hit</i> is a read from Redis, then kept in L1; a change on one replica (an update, an
  invalidation, a fill) evicts the key from the other replicas' L1 through Redis pub/sub
  (<i>bus evictions</i>).`
      : ' Run <code>REPLICAS=4 CACHE=redis</code> to see one fill across a fleet.'
  }</p>
</section>
<section class="fleet panel">
  <h2>${view.replicas > 1 ? 'Replicas' : 'Replica'}</h2>
  <table id="fleet-table" class="${view.redis ? 'lock' : 'no-lock'}">
    <thead><tr><th>replica</th><th>url</th><th>serving</th><th>requests</th><th>fills</th><th>coalesced</th><th class="lockwaits">lock-wait hits</th><th>queries</th><th class="tier">L1 hits</th><th class="tier">L2 hits</th><th class="tier">bus evictions</th></tr></thead>
    <tbody id="replicas" data-testid="replicas"></tbody>
    <tfoot><tr><th colspan="2">fleet total</th><td></td><td data-testid="fleet-requests">-</td><td data-testid="fleet-fills">-</td><td data-testid="fleet-coalesced">-</td><td class="lockwaits" data-testid="fleet-lockwaits">-</td><td data-testid="fleet-queries">-</td><td class="tier" data-testid="fleet-l1hits">-</td><td class="tier" data-testid="fleet-l2hits">-</td><td class="tier" data-testid="fleet-busevictions">-</td></tr></tfoot>
  </table>
</section>
</main>
<script>const SETTINGS = ${settings};
${SCRIPT}</script>
</body>
</html>`;
}

/** @type {Record<string, string>} */
const STEADY_LABELS = { plain: 'TTL only', swr: 'stale-while-revalidate', early: 'early refresh' };

/** @param {string} id @param {string} label @param {string} [tone] */
function counter(id, label, tone = '') {
  return `<div class="counter ${tone}"><span class="value" id="counter-${id}" data-testid="counter-${id}">-</span><span class="label">${label}</span></div>`;
}

/** @param {string} id @param {string} label @param {string} tone */
function resultRow(id, label, tone) {
  const t = `result-${id}`;
  return `<div class="result ${tone}" id="${t}" data-testid="${t}" data-done="0">
    <div class="result-label">${label}</div>
    <div class="bar"><div class="fill" id="${t}-bar"></div></div>
    <div class="result-text"><b data-testid="${t}-queries" id="${t}-queries">-</b> database <span id="${t}-queries-unit">queries</span> for
    <span data-testid="${t}-n" id="${t}-n">-</span> requests · <span data-testid="${t}-fills" id="${t}-fills">-</span> <span id="${t}-fills-unit">fills</span> ·
    <span data-testid="${t}-coalesced" id="${t}-coalesced">-</span> coalesced · <span data-testid="${t}-ms" id="${t}-ms">-</span> ms
    <span class="outcome" id="${t}-outcome" data-testid="${t}-outcome"></span></div>
  </div>`;
}
