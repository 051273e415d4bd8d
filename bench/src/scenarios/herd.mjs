// Scenario 2: a cold herd in one process. K callers ask for one missing key at once; the fill takes
// `fillMs`. Reports fills, the time beyond the fill until the last caller has its value, and the
// p99 of each caller's own latency.
import { config } from '../config.mjs';
import { median, ms, percentile, progress, ratio, rotate, sleep, table } from '../stats.mjs';

async function herdOnce(instance, key, callers, fillMs) {
  let fills = 0;
  let fillTook = 0;
  const fill = async () => {
    fills++;
    const t = performance.now();
    await sleep(fillMs);
    fillTook = performance.now() - t;
    return { count: 1 };
  };
  const starts = new Float64Array(callers);
  const ends = new Float64Array(callers);
  globalThis.gc?.();
  const t0 = performance.now();
  const pending = new Array(callers);
  for (let i = 0; i < callers; i++) {
    starts[i] = performance.now();
    pending[i] = instance.get(key, fill).then(() => {
      ends[i] = performance.now();
    });
  }
  await Promise.all(pending);
  let last = 0;
  const latencies = new Float64Array(callers);
  for (let i = 0; i < callers; i++) {
    if (ends[i] > last) last = ends[i];
    latencies[i] = ends[i] - starts[i];
  }
  return { fills, fillTook, overhead: last - t0 - fillTook, p99: percentile(latencies, 99) };
}

export async function herdScenario(peers) {
  const { rounds, callers } = config.herd;
  const { fillMs } = config;
  const contenders = peers.map((peer) => ({ peer, instance: peer.memory(), results: [] }));
  for (let round = 0; round < rounds; round++) {
    for (const c of rotate(contenders, round)) {
      c.results.push(await herdOnce(c.instance, `herd:${round}`, callers, fillMs));
    }
    progress(`herd: round ${round + 1}/${rounds} done`);
  }
  const rows = contenders.map(({ peer, results }) => {
    const fills = results.map((r) => r.fills);
    const p99 = median(results.map((r) => r.p99));
    return [
      peer.label,
      fillsText(fills),
      ms(median(results.map((r) => r.overhead))),
      ms(p99),
      ratio(p99 / fillMs),
    ];
  });
  const ours = contenders[0].results;
  const oursOverhead = median(ours.map((r) => r.overhead));
  const oursFills = Math.max(...ours.map((r) => r.fills));
  const markdown = [
    `### 2. Cold herd in one process (${callers.toLocaleString('en-US')} callers, ${fillMs} ms fill, ${rounds} rounds)`,
    '',
    table(
      [
        'library',
        'fills per herd',
        'overhead beyond the fill (median)',
        'p99 caller latency (median)',
        'p99 / fill time',
      ],
      rows,
      ['l', 'r', 'r', 'r', 'r'],
    ),
  ].join('\n');
  const targets = [
    {
      name: `cold herd of ${callers.toLocaleString('en-US')}: 1 fill, <= 10 ms beyond the fill`,
      met: oursFills === 1 && oursOverhead <= 10,
      detail: `${oursFills} fill(s) at most per round, overhead ${ms(oursOverhead)}`,
    },
  ];
  return { markdown, targets };
}

export function fillsText(fills) {
  const lo = Math.min(...fills);
  const hi = Math.max(...fills);
  return lo === hi
    ? lo.toLocaleString('en-US')
    : `${lo.toLocaleString('en-US')} .. ${hi.toLocaleString('en-US')}`;
}
