// Scenario 10: steady load across expiries. P processes each read one hot key on Redis at a steady
// rate (one read every `intervalMs`) for `periods` ttl periods after the first fill. Reports, per
// library: reads that waited for a fill (latency >= half the fill time) after the first fill, the
// slowest read near each expiry (from 100 ms before a value's expiry to a fill time + 100 ms after,
// median over expiries) beside an ordinary read, and fills (refreshes) per ttl period fleet-wide.
import { fileURLToPath } from 'node:url';
import { startChild } from '../child.mjs';
import { config } from '../config.mjs';
import { steadyVariants } from '../peers/steady.mjs';
import { cleanPrefix, connect, randomPrefix } from '../redis.mjs';
import { median, ms, progress, table } from '../stats.mjs';

const childPath = fileURLToPath(new URL('../steady-child.mjs', import.meta.url));

function analyse(reports, { ttlMs, fillMs }) {
  const reads = reports.flatMap((r) => r.reads);
  const fills = reports.flatMap((r) => r.fills).sort((a, b) => a - b);
  const served = reads.filter(([, , filledAt]) => filledAt > 0);
  const errors = reads.filter(([, , filledAt]) => filledAt === -1).length;
  const first = Math.min(...served.map(([, , filledAt]) => filledAt));
  const after = reads.filter(([start]) => start >= first);
  const lastStart = Math.max(...reads.map(([start]) => start));
  const waited = after.filter(([, latency]) => latency >= fillMs / 2).length;
  const ordinary = median(after.map(([, latency]) => latency));
  const values = [...new Set(served.map(([, , filledAt]) => filledAt))].sort((a, b) => a - b);
  const nearExpiry = [];
  const control = [];
  const slowest = (from, to) => {
    const window = after.filter(([start]) => start >= from && start <= to);
    return window.length > 0 ? Math.max(...window.map(([, latency]) => latency)) : undefined;
  };
  for (const filledAt of values) {
    const expiry = filledAt + ttlMs;
    if (expiry + fillMs + 100 > lastStart) continue;
    const near = slowest(expiry - 100, expiry + fillMs + 100);
    if (near !== undefined) nearExpiry.push(near);
    // The control: a window as long, half a ttl before the expiry, where no refresh runs.
    const far = slowest(expiry - ttlMs / 2 - 100, expiry - ttlMs / 2 + fillMs + 100);
    if (far !== undefined) control.push(far);
  }
  const coldFills = fills.filter((started) => started < first).length;
  const periods = (lastStart - first) / ttlMs;
  return {
    reads: reads.length,
    errors,
    waited,
    ordinary,
    slowestNearExpiry: nearExpiry.length > 0 ? median(nearExpiry) : Number.NaN,
    slowestAway: control.length > 0 ? median(control) : Number.NaN,
    expiries: nearExpiry.length,
    coldFills,
    refreshesPerPeriod: (fills.length - coldFills) / periods,
  };
}

export async function steadyScenario({ url }) {
  const { processes, ttlMs, fillMs, periods, intervalMs } = config.steady;
  const prefix = randomPrefix();
  const admin = connect(url);
  const children = Array.from({ length: processes }, () => startChild(childPath));
  const results = {};
  let unavailable = {};
  try {
    const setups = await Promise.all(
      children.map(({ ask }) => ask({ type: 'setup', url, prefix, ttlMs }, 'setup-done')),
    );
    unavailable = Object.assign({}, ...setups.map((s) => s.unavailable));
    for (const variant of steadyVariants) {
      if (unavailable[variant.id] !== undefined) continue;
      const durationMs = periods * ttlMs + 500;
      const answers = children.map(({ next }) => next('result', durationMs + 60_000));
      for (const { child } of children) {
        child.send({
          type: 'go',
          variant: variant.id,
          key: `steady:${variant.id}`,
          durationMs,
          intervalMs,
          fillMs,
        });
      }
      results[variant.id] = analyse(await Promise.all(answers), { ttlMs, fillMs });
      const r = results[variant.id];
      progress(
        `steady: ${variant.id}: ${r.waited} waited, slowest near expiry ${ms(r.slowestNearExpiry)}, ${r.refreshesPerPeriod.toFixed(2)} refreshes per period`,
      );
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await cleanPrefix(admin, prefix);
    await admin.quit();
  }
  const rows = steadyVariants.map((v) => {
    const r = results[v.id];
    if (r === undefined) return [v.label, v.feature, unavailable[v.id] ?? 'not run', '', '', '', '', ''];
    return [
      v.label,
      v.feature,
      `${r.waited.toLocaleString('en-US')} of ${r.reads.toLocaleString('en-US')}${r.errors > 0 ? ` (${r.errors} errors)` : ''}`,
      ms(r.ordinary),
      `${ms(r.slowestNearExpiry)} (${r.expiries} expiries)`,
      ms(r.slowestAway),
      String(r.coldFills),
      r.refreshesPerPeriod.toFixed(2),
    ];
  });
  const ours = results['stampede-early'];
  const name =
    'steady load with earlyRefresh + lock: 0 reads wait for a fill after the first, slowest read near an expiry within 2 ms of the slowest ordinary read (as long a window away from expiries), <= 1.2 refreshes per ttl period fleet-wide';
  const targets = [
    ours === undefined
      ? { name, met: false, detail: unavailable['stampede-early'] ?? 'not run' }
      : {
          name,
          met:
            ours.waited === 0 &&
            ours.slowestNearExpiry - ours.slowestAway <= 2 &&
            ours.refreshesPerPeriod <= 1.2,
          detail: `${ours.waited} waited, slowest near expiry ${ms(ours.slowestNearExpiry)} vs ${ms(ours.ordinary)} ordinary (${ms(ours.slowestAway)} slowest away from expiries), ${ours.refreshesPerPeriod.toFixed(2)} refreshes per period`,
        },
  ];
  return {
    markdown: [
      `### 10. Steady load across expiries (${processes} processes x ~${Math.round(1_000 / intervalMs)} reads/s on one key on Redis, ttl ${ms(ttlMs)}, fill ${fillMs} ms, ${periods} ttl periods)`,
      '',
      table(
        [
          'library',
          'feature used',
          'reads that waited for a fill (after the first)',
          'ordinary read (median)',
          'slowest read near an expiry (median over expiries)',
          'slowest read in as long a window half a ttl earlier (control)',
          'cold fills',
          'refreshes per ttl period, fleet-wide',
        ],
        rows,
        ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r'],
      ),
    ].join('\n'),
    targets,
  };
}
