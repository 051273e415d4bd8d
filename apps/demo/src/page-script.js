// Runs in the browser (inlined into the page by page.mjs; SETTINGS is defined just before it).
/* global SETTINGS */
(() => {
  const WINDOW = 60;
  const $ = (id) => document.getElementById(id);
  const fmt = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '-');
  /** @type {{ requests: number, queries: number, fills: number }[]} */
  const series = [];
  /** @type {{ at: number, label: string, tone: string }[]} */
  const marks = [];
  let previous;
  let polling = false;

  function setText(id, value) {
    const el = $(id);
    if (el) el.textContent = fmt(value);
  }

  async function poll() {
    if (polling) return;
    polling = true;
    try {
      const response = await fetch('/api/fleet', { cache: 'no-store' });
      if (!response.ok) return;
      const fleet = await response.json();
      const { cache, db, requests } = fleet.total;
      const totalRequests = requests.protected + requests.unprotected + requests.steady;
      setText('counter-requests', totalRequests);
      setText('counter-queries', db.queries);
      setText('counter-fills', cache.fills);
      setText('counter-coalesced', cache.coalescedWaits);
      setText('counter-hits', cache.hits);
      setText('counter-stale', cache.staleHits);
      setText('counter-lockwaits', cache.lockWaitHits);
      setText('counter-failsafe', cache.failSafeActivations);
      setText('counter-dberrors', db.failedQueries);
      const outage = fleet.replicas.find((r) => r.metrics)?.metrics.db.outage;
      if (outage && !switching) showOutage(outage);
      const now = { requests: totalRequests, queries: db.queries, fills: cache.fills };
      if (previous) {
        series.push({
          requests: Math.max(0, now.requests - previous.requests),
          queries: Math.max(0, now.queries - previous.queries),
          fills: Math.max(0, now.fills - previous.fills),
        });
        if (series.length > WINDOW) series.shift();
        for (const mark of marks) mark.at--;
        while (marks.length > 0 && marks[0].at < -WINDOW) marks.shift();
      }
      previous = now;
      renderReplicas(fleet);
      drawChart();
    } catch {
      // The server may be restarting; the next tick tries again.
    } finally {
      polling = false;
    }
  }

  function renderReplicas(fleet) {
    const rows = fleet.replicas.map((r) => {
      const m = r.metrics;
      const cell = (id, value) =>
        `<td class="${id}" data-testid="replica-${r.replica}-${id}">${m ? fmt(value) : 'down'}</td>`;
      const tier = (id, name) => cell(id, m?.cache[name]).replace('class="', 'class="tier ');
      return `<tr><td>${r.replica || 'single'}</td><td>${r.url}</td>${cell('serving', m?.requests.lastServed)}${cell('requests', m && m.requests.protected + m.requests.unprotected + m.requests.steady)}${cell('fills', m?.cache.fills)}${cell('coalesced', m?.cache.coalescedWaits)}${cell('lockwaits', m?.cache.lockWaitHits)}${cell('queries', m?.db.queries)}${tier('l1hits', 'l1Hits')}${tier('l2hits', 'l2Hits')}${tier('busevictions', 'busEvictions')}</tr>`;
    });
    $('replicas').innerHTML = rows.join('');
    const t = fleet.total;
    const set = (id, v) => {
      document.querySelector(`[data-testid="${id}"]`).textContent = fmt(v);
    };
    $('fleet-table').classList.toggle(
      'tiered',
      fleet.replicas.some((r) => r.metrics?.tiered),
    );
    set('fleet-l1hits', t.cache.l1Hits);
    set('fleet-l2hits', t.cache.l2Hits);
    set('fleet-busevictions', t.cache.busEvictions);
    set('fleet-requests', t.requests.protected + t.requests.unprotected + t.requests.steady);
    set('fleet-fills', t.cache.fills);
    set('fleet-coalesced', t.cache.coalescedWaits);
    set('fleet-lockwaits', t.cache.lockWaitHits);
    set('fleet-queries', t.db.queries);
  }

  function drawChart() {
    const svg = $('chart');
    const [W, H, left, top, bottom] = [560, 230, 44, 10, 24];
    const peak = Math.max(10, ...series.map((s) => Math.max(s.requests, s.queries, s.fills)));
    const decades = Math.ceil(Math.log10(peak + 1));
    const y = (v) => top + (H - top - bottom) * (1 - Math.log10(v + 1) / decades);
    const x = (i) => left + ((W - left - 8) * (i + WINDOW - series.length)) / (WINDOW - 1);
    let out = '';
    for (let d = 0; d <= decades; d++) {
      const v = d === 0 ? 0 : 10 ** d;
      out += `<line x1="${left}" x2="${W - 8}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${left - 6}" y="${y(v) + 4}" class="tick" text-anchor="end">${fmt(v)}</text>`;
    }
    out += `<text x="${left}" y="${H - 4}" class="tick">60 s ago</text><text x="${W - 8}" y="${H - 4}" class="tick" text-anchor="end">now</text>`;
    marks.forEach((mark, i) => {
      const mx = x(series.length - 1 + mark.at);
      if (mx < left) return;
      const [lx, anchor] = mx > W - 130 ? [mx - 4, 'end'] : [mx + 4, 'start'];
      const ly = top + 12 + (i % 3) * 13;
      out += `<line x1="${mx}" x2="${mx}" y1="${top}" y2="${H - bottom}" class="mark ${mark.tone}"/><text x="${lx}" y="${ly}" text-anchor="${anchor}" class="mark-label ${mark.tone}">${mark.label}</text>`;
    });
    for (const [key, cls] of [
      ['requests', 'req'],
      ['queries', 'q'],
      ['fills', 'f'],
    ]) {
      const points = series.map((s, i) => `${x(i).toFixed(1)},${y(s[key]).toFixed(1)}`).join(' ');
      if (points) out += `<polyline points="${points}" class="line ${cls}"/>`;
    }
    svg.innerHTML = out;
  }

  function showResult(id, result) {
    const t = `result-${id}`;
    setText(`${t}-queries`, result.queries);
    setText(`${t}-n`, result.n);
    setText(`${t}-fills`, result.fills);
    setText(`${t}-coalesced`, result.coalescedWaits);
    setText(`${t}-ms`, result.ms);
    $(`${t}-queries-unit`).textContent = result.queries === 1 ? 'query' : 'queries';
    $(`${t}-fills-unit`).textContent = result.fills === 1 ? 'fill' : 'fills';
    const outcome = [];
    if (result.reset === 'expire') outcome.push('key expired, not deleted (outage)');
    if (result.errors) outcome.push(`${fmt(result.errors)} errors`);
    if (result.failSafeActivations) outcome.push(`${fmt(result.failSafeActivations)} fail-safe`);
    if (result.softTimeouts) outcome.push(`${fmt(result.softTimeouts)} soft timeouts`);
    if (result.staleHits) outcome.push(`${fmt(result.staleHits)} served stale`);
    $(`${t}-outcome`).textContent = outcome.length ? ` · ${outcome.join(' · ')}` : '';
    $(t).dataset.errors = String(result.errors);
    $(`${t}-bar`).style.width = `${Math.max(0.6, Math.min(100, (result.queries / result.n) * 100))}%`;
    $(t).dataset.done = '1';
  }

  async function fireHerd(button) {
    const n = Number($('herd-n').value);
    const { protect, lock } = button.dataset;
    const id = protect === '0' ? 'unprotected' : lock === '0' ? 'nolock' : 'protected';
    const failSafe = protect === '1' && $('failsafe').checked ? 1 : 0;
    const buttons = document.querySelectorAll('.herd .buttons button, .steady-buttons button');
    for (const b of buttons) b.disabled = true;
    const status = $('herd-status');
    status.dataset.state = 'running';
    status.textContent = `Firing ${fmt(n)} concurrent requests (${button.textContent})...`;
    try {
      const response = await fetch(`/api/herd?n=${n}&protect=${protect}&lock=${lock}&failsafe=${failSafe}`, {
        method: 'POST',
      });
      const result = await response.json();
      if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
      showResult(id, result);
      marks.push({ at: 0, label: button.textContent, tone: button.className });
      const per =
        result.replicas.length > 1
          ? ` (fills per replica: ${result.replicas.map((r) => r.fills).join(' + ')})`
          : '';
      const label = `${button.textContent}${failSafe ? ' + fail-safe' : ''}`;
      status.textContent = `${label}: ${fmt(result.n)} requests, ${fmt(result.queries)} database ${result.queries === 1 ? 'query' : 'queries'}, ${fmt(result.fills)} ${result.fills === 1 ? 'fill' : 'fills'}${per}, ${fmt(result.ms)} ms${result.errors ? `, ${result.errors} errors` : ''}${result.failSafeActivations ? `, ${result.failSafeActivations} fail-safe` : ''}.`;
      status.dataset.state = 'done';
    } catch (error) {
      status.textContent = `Herd failed: ${error.message}`;
      status.dataset.state = 'error';
    } finally {
      for (const b of buttons) b.disabled = false;
      poll();
    }
  }

  let switching = false;
  const OUTAGE_TEXT = {
    off: 'Database up.',
    error: 'Outage: every query fails.',
    stall: 'Outage: every query hangs (5 s, then fails).',
  };
  function showOutage(outage) {
    const status = $('outage-status');
    status.dataset.outage = outage;
    status.textContent = OUTAGE_TEXT[outage] ?? outage;
    status.dataset.state = outage === 'off' ? 'done' : 'error';
    for (const b of document.querySelectorAll('.outage-buttons button')) {
      b.setAttribute('aria-pressed', String(b.dataset.outage === outage));
    }
  }
  async function setOutage(button) {
    switching = true;
    try {
      const response = await fetch(`/api/outage?mode=${button.dataset.outage}`, { method: 'POST' });
      const result = await response.json();
      if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
      showOutage(result.outage);
    } catch (error) {
      $('outage-status').textContent = `Switch failed: ${error.message}`;
    } finally {
      switching = false;
    }
  }

  async function update(button) {
    const status = $('update-status');
    button.disabled = true;
    status.dataset.state = 'running';
    status.textContent = 'Adding a bookmark...';
    try {
      const response = await fetch('/api/update', { method: 'POST' });
      const result = await response.json();
      if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
      const each = result.replicas
        .map(
          (r) =>
            `${r.replica ? `replica ${r.replica}` : 'this process'} ${r.count === result.count ? `after ${fmt(r.ms)} ms` : r.error ? `failed (${r.error})` : `still ${fmt(r.count)}`}`,
        )
        .join(', ');
      status.textContent = `Count is now ${fmt(result.count)}. ${result.allServeNewCount ? 'Served by every replica' : 'NOT served everywhere'}: ${each}.`;
      status.dataset.state = result.allServeNewCount ? 'done' : 'error';
      status.dataset.count = String(result.count);
    } catch (error) {
      status.textContent = `Update failed: ${error.message}`;
      status.dataset.state = 'error';
    } finally {
      button.disabled = false;
      poll();
    }
  }

  /** The last steady run of each variant. */
  const steadyRuns = {};
  const STEADY_LABEL = { plain: 'TTL only', swr: 'stale-while-revalidate', early: 'early refresh' };

  async function runSteady(button) {
    const variant = button.dataset.variant;
    const rate = Number($('steady-rate').value);
    const seconds = Number($('steady-seconds').value);
    const failSafe = $('failsafe').checked ? 1 : 0;
    const buttons = document.querySelectorAll('.herd .buttons button, .steady-buttons button');
    for (const b of buttons) b.disabled = true;
    const status = $('steady-status');
    status.dataset.state = 'running';
    status.textContent = `${STEADY_LABEL[variant]}: ${fmt(rate)} requests/s for ${seconds} s...`;
    try {
      const response = await fetch(
        `/api/steady?variant=${variant}&rate=${rate}&seconds=${seconds}&failsafe=${failSafe}`,
        { method: 'POST' },
      );
      const result = await response.json();
      if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
      steadyRuns[variant] = result;
      status.textContent = `${STEADY_LABEL[variant]}: ${fmt(result.n)} requests, ${fmt(result.slow)} slower than 50 ms, slowest ${fmt(result.max)} ms, ${fmt(result.cache.fills)} fills${result.errors ? `, ${result.errors} errors` : ''}.`;
      status.dataset.state = 'done';
      drawSteady();
    } catch (error) {
      status.textContent = `Steady load failed: ${error.message}`;
      status.dataset.state = 'error';
    } finally {
      for (const b of buttons) b.disabled = false;
      poll();
    }
  }

  function drawSteady() {
    const svg = $('steady-chart');
    const [W, H, left, top, bottom] = [1160, 240, 50, 10, 24];
    const runs = Object.entries(steadyRuns);
    const span = Math.max(1, ...runs.map(([, r]) => r.seconds)) * 1000;
    const peak = Math.max(100, ...runs.map(([, r]) => r.max));
    const decades = Math.ceil(Math.log10(peak));
    const y = (ms) => top + (H - top - bottom) * (1 - (Math.log10(Math.max(ms, 0.1)) + 1) / (decades + 1));
    const x = (t) => left + ((W - left - 8) * t) / span;
    let out = '';
    for (let d = -1; d <= decades; d++) {
      const v = 10 ** d;
      out += `<line x1="${left}" x2="${W - 8}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${left - 6}" y="${y(v) + 4}" class="tick" text-anchor="end">${v} ms</text>`;
    }
    for (let s = 0; s <= span / 1000; s++) {
      out += `<text x="${x(s * 1000)}" y="${H - 6}" class="tick" text-anchor="middle">${s} s</text>`;
    }
    for (const [variant, run] of runs) {
      const d = run.samples.map(([t, ms]) => `M${x(t).toFixed(1)} ${y(ms).toFixed(1)}h0`).join('');
      out += `<path d="${d}" class="dots variant-${variant}" data-testid="steady-dots-${variant}"/>`;
    }
    svg.innerHTML = out;
    $('steady-legend').innerHTML = runs
      .map(([variant]) => `<i class="variant-${variant}"></i>${STEADY_LABEL[variant]}`)
      .join(' ');
    $('steady-results').innerHTML = runs
      .map(([variant, r]) => {
        const refreshes = (r.cache.backgroundRefreshes ?? 0) + (r.cache.earlyRefreshes ?? 0);
        return `<tr data-testid="steady-row-${variant}"><td>${STEADY_LABEL[variant]}</td><td>${fmt(r.n)}</td><td data-testid="steady-${variant}-slow">${fmt(r.slow)}</td><td>${fmt(r.p50)}</td><td>${fmt(r.p99)}</td><td data-testid="steady-${variant}-max">${fmt(r.max)}</td><td data-testid="steady-${variant}-fills">${fmt(r.cache.fills)}</td><td data-testid="steady-${variant}-refreshes">${fmt(refreshes)}</td><td data-testid="steady-${variant}-errors">${fmt(r.errors)}</td></tr>`;
      })
      .join('');
  }

  for (const button of document.querySelectorAll('.herd .buttons button')) {
    button.addEventListener('click', () => fireHerd(button));
  }
  for (const button of document.querySelectorAll('.outage-buttons button')) {
    button.addEventListener('click', () => setOutage(button));
  }
  for (const button of document.querySelectorAll('.steady-buttons button')) {
    button.addEventListener('click', () => runSteady(button));
  }
  $('update').addEventListener('click', () => update($('update')));
  showOutage(SETTINGS.outage);
  $('herd-n').max = String(SETTINGS.herdMax);
  poll();
  setInterval(poll, 1000);
})();
