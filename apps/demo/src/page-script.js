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
      const totalRequests = requests.protected + requests.unprotected;
      setText('counter-requests', totalRequests);
      setText('counter-queries', db.queries);
      setText('counter-fills', cache.fills);
      setText('counter-coalesced', cache.coalescedWaits);
      setText('counter-hits', cache.hits);
      setText('counter-stale', cache.staleHits);
      setText('counter-lockwaits', cache.lockWaitHits);
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
      return `<tr><td>${r.replica || 'single'}</td><td>${r.url}</td>${cell('requests', m && m.requests.protected + m.requests.unprotected)}${cell('fills', m?.cache.fills)}${cell('coalesced', m?.cache.coalescedWaits)}${cell('lockwaits', m?.cache.lockWaitHits)}${cell('queries', m?.db.queries)}</tr>`;
    });
    $('replicas').innerHTML = rows.join('');
    const t = fleet.total;
    const set = (id, v) => {
      document.querySelector(`[data-testid="${id}"]`).textContent = fmt(v);
    };
    set('fleet-requests', t.requests.protected + t.requests.unprotected);
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
    $(`${t}-bar`).style.width = `${Math.max(0.6, Math.min(100, (result.queries / result.n) * 100))}%`;
    $(t).dataset.done = '1';
  }

  async function fireHerd(button) {
    const n = Number($('herd-n').value);
    const { protect, lock } = button.dataset;
    const id = protect === '0' ? 'unprotected' : lock === '0' ? 'nolock' : 'protected';
    const buttons = document.querySelectorAll('.buttons button');
    for (const b of buttons) b.disabled = true;
    const status = $('herd-status');
    status.dataset.state = 'running';
    status.textContent = `Firing ${fmt(n)} concurrent requests (${button.textContent})...`;
    try {
      const response = await fetch(`/api/herd?n=${n}&protect=${protect}&lock=${lock}`, { method: 'POST' });
      const result = await response.json();
      if (!response.ok) throw new Error(result.error || `HTTP ${response.status}`);
      showResult(id, result);
      marks.push({ at: 0, label: button.textContent, tone: button.className });
      const per =
        result.replicas.length > 1
          ? ` (fills per replica: ${result.replicas.map((r) => r.fills).join(' + ')})`
          : '';
      status.textContent = `${button.textContent}: ${fmt(result.n)} requests, ${fmt(result.queries)} database ${result.queries === 1 ? 'query' : 'queries'}, ${fmt(result.fills)} ${result.fills === 1 ? 'fill' : 'fills'}${per}, ${fmt(result.ms)} ms${result.errors ? `, ${result.errors} errors` : ''}.`;
      status.dataset.state = 'done';
    } catch (error) {
      status.textContent = `Herd failed: ${error.message}`;
      status.dataset.state = 'error';
    } finally {
      for (const b of buttons) b.disabled = false;
      poll();
    }
  }

  for (const button of document.querySelectorAll('.buttons button')) {
    button.addEventListener('click', () => fireHerd(button));
  }
  $('herd-n').max = String(SETTINGS.herdMax);
  poll();
  setInterval(poll, 1000);
})();
