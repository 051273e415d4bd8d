// Scenario 3: a failing fill. N callers ask for one missing key; the fill fails after `fillMs`.
// Reports fills and the wall time until every caller has its answer (an error). A library still
// running after `capMs` is reported as "> cap, N fills so far": from then on its fills fail at
// once so the rest drain quickly, and it is not run again.
import { config } from '../config.mjs';
import { median, ms, progress, ratio, rotate, sleep, startCallers, table } from '../stats.mjs';
import { fillsText } from './herd.mjs';

async function failOnce(instance, key, callers, fillMs, capMs) {
  let fills = 0;
  let stop = false;
  let fillTook = 0;
  const fill = async () => {
    fills++;
    if (!stop) {
      const t = performance.now();
      await sleep(fillMs);
      fillTook = performance.now() - t;
    }
    throw new Error('database unavailable');
  };
  globalThis.gc?.();
  const t0 = performance.now();
  const { all, latencies, counts } = startCallers(callers, () => instance.get(key, fill));
  let timer;
  const capped = await Promise.race([
    all.then(() => false),
    new Promise((resolve) => {
      timer = setTimeout(() => resolve(true), capMs);
    }),
  ]);
  clearTimeout(timer);
  const wall = performance.now() - t0;
  const fillsAtCap = fills;
  if (capped) {
    stop = true;
    await Promise.race([all, sleep(10_000)]);
  }
  return {
    fills: fillsAtCap,
    capped,
    wall,
    fillTook,
    failed: counts.failed,
    answered: counts.answered,
    maxLatency: Math.max(...latencies),
  };
}

export async function failingScenario(peers) {
  const { rounds, callers, capMs } = config.failing;
  const { fillMs } = config;
  const contenders = peers.map((peer) => ({ peer, instance: peer.memory(), results: [] }));
  for (let round = 0; round < rounds; round++) {
    for (const c of rotate(contenders, round)) {
      if (c.results.some((r) => r.capped)) continue;
      const result = await failOnce(c.instance, `failing:${round}`, callers, fillMs, capMs);
      c.results.push(result);
      if (result.capped) progress(`failing: ${c.peer.label} still running after ${ms(capMs)}: capped`);
    }
    progress(`failing: round ${round + 1}/${rounds} done`);
  }
  const rows = contenders.map(({ peer, results }) => {
    const capped = results.find((r) => r.capped);
    if (capped) {
      return [
        peer.label,
        `> ${capped.fills.toLocaleString('en-US')} (so far)`,
        `> ${ms(capMs)}, ${capped.fills.toLocaleString('en-US')} fills so far`,
        `> ${ratio(capMs / fillMs)}`,
        'n/a',
      ];
    }
    const wall = median(results.map((r) => r.wall));
    const beyond = median(results.map((r) => r.maxLatency - r.fillTook));
    return [peer.label, fillsText(results.map((r) => r.fills)), ms(wall), ratio(wall / fillMs), ms(beyond)];
  });
  const ours = contenders[0].results;
  const oursFills = Math.max(...ours.map((r) => r.fills));
  const oursBeyond = median(ours.map((r) => r.maxLatency - r.fillTook));
  const markdown = [
    `### 3. Failing fill (${callers.toLocaleString('en-US')} callers, fill fails after ${fillMs} ms, cap ${ms(capMs)}, up to ${rounds} rounds)`,
    '',
    table(
      [
        'library',
        'fills',
        'wall time until every caller answered (median)',
        'wall / fill time',
        'slowest caller beyond the fill (median)',
      ],
      rows,
      ['l', 'r', 'r', 'r', 'r'],
    ),
  ].join('\n');
  const targets = [
    {
      name: 'failing fill: 1 fill, every caller answered within the fill time + 10 ms',
      met: oursFills === 1 && oursBeyond <= 10 && ours.every((r) => !r.capped && r.failed === callers),
      detail: `${oursFills} fill(s) at most per round, slowest caller ${ms(oursBeyond)} beyond the fill`,
    },
  ];
  return { markdown, targets };
}
