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
</section>
<section class="herd panel">
  <h2>Fire a herd at an expired key</h2>
  <p class="explain">Invalidates <code>bookmark_count</code>, then sends
  <input id="herd-n" data-testid="herd-n" type="number" min="1" max="${view.herdMax}" value="500" aria-label="requests in the herd">
  concurrent HTTP requests${view.replicas > 1 ? ', spread across the replicas' : ''}.</p>
  <div class="buttons">
    <button type="button" id="herd-unprotected" data-testid="herd-unprotected" data-protect="0" data-lock="0" class="red">no protection</button>
    ${lockButton}
    <button type="button" id="herd-protected" data-testid="herd-protected" data-protect="1" data-lock="1" class="green">stampede</button>
  </div>
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
<section class="about panel">
  <h2>What you are looking at</h2>
  <p><b class="t-red">No protection</b>: plain cache-aside. Every request that finds the key missing runs the
  query itself, so a herd arriving at an expired key becomes a herd of database queries.
  <b class="t-green">stampede</b>: <code>getOrCompute</code> lets the first miss run the query; the other
  requests on this process wait for that one result (<i>coalesced waits</i>) and later ones are <i>hits</i>.${
    view.redis
      ? ` Across replicas, the distributed fill lock makes the other replicas wait for the winner's value
  (<i>lock-wait hits</i>): one fill fleet-wide; without it, up to one fill per replica.`
      : ' Run <code>REPLICAS=4 CACHE=redis</code> to see one fill across a fleet.'
  }</p>
</section>
<section class="fleet panel">
  <h2>${view.replicas > 1 ? 'Replicas' : 'Replica'}</h2>
  <table class="${view.redis ? 'lock' : 'no-lock'}">
    <thead><tr><th>replica</th><th>url</th><th>requests</th><th>fills</th><th>coalesced</th><th class="lockwaits">lock-wait hits</th><th>queries</th></tr></thead>
    <tbody id="replicas" data-testid="replicas"></tbody>
    <tfoot><tr><th colspan="2">fleet total</th><td data-testid="fleet-requests">-</td><td data-testid="fleet-fills">-</td><td data-testid="fleet-coalesced">-</td><td class="lockwaits" data-testid="fleet-lockwaits">-</td><td data-testid="fleet-queries">-</td></tr></tfoot>
  </table>
</section>
</main>
<script>const SETTINGS = ${settings};
${SCRIPT}</script>
</body>
</html>`;
}

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
    <span data-testid="${t}-coalesced" id="${t}-coalesced">-</span> coalesced · <span data-testid="${t}-ms" id="${t}-ms">-</span> ms</div>
  </div>`;
}
