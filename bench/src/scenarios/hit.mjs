// Scenario 1: a memory hit, ns/op, against an awaited raw lru-cache get in the same run. Each case
// runs in its own child process (no shared JIT state or heap between libraries); iterations are
// calibrated per case so a sample runs about `sampleMs`; rounds are interleaved (one sample of
// each case in turn, the order rotating each round) and the table shows medians.
import { fileURLToPath } from 'node:url';
import { startChild } from '../child.mjs';
import { config } from '../config.mjs';
import { rawLru } from '../peers/raw-lru.mjs';
import { median, ns, pinning, progress, ratio, rotate, table } from '../stats.mjs';

const childPath = fileURLToPath(new URL('../hit-child.mjs', import.meta.url));

export async function hitScenario(peers) {
  const { rounds, sampleMs, keys } = config.hit;
  const cases = [
    { id: 'raw', label: rawLru.label, peer: undefined },
    ...peers.flatMap((peer) => peer.hit.map((h, i) => ({ id: `${peer.id}#${i}`, label: h.label, peer }))),
  ];
  try {
    for (const c of cases) {
      c.worker = startChild(childPath, { pin: true });
      const { n } = await c.worker.ask({ type: 'setup', id: c.id, keys, sampleMs }, 'ready', 60_000);
      c.n = n;
      c.samples = [];
      c.misses = 0;
      progress(`hit: ${c.label}: ${n.toLocaleString('en-US')} ops per sample`);
    }
    for (let round = 0; round < rounds; round++) {
      for (const c of rotate(cases, round)) {
        const { nsPerOp, misses } = await c.worker.ask({ type: 'sample' }, 'sample', 60_000);
        c.samples.push(nsPerOp);
        c.misses += misses;
      }
      progress(`hit: round ${round + 1}/${rounds} done`);
    }
  } finally {
    await Promise.all(cases.map((c) => c.worker?.stop()));
  }
  const base = median(cases[0].samples);
  const rows = cases.map((c) => {
    const m = median(c.samples);
    const label = c.misses > 0 ? `${c.label} (**${c.misses} calls were not hits**)` : c.label;
    return [label, ns(m), ratio(m / base), `${ns(Math.min(...c.samples))} .. ${ns(Math.max(...c.samples))}`];
  });
  const ours = median(cases[1].samples);
  const peerCases = cases.filter((c) => c.peer?.kind === 'peer');
  const fastestPeer = peerCases.reduce((a, b) => (median(a.samples) <= median(b.samples) ? a : b));
  const fastestPeerNs = median(fastestPeer.samples);
  const markdown = [
    `### 1. Memory hit (${rounds} interleaved rounds, ~${sampleMs} ms per sample, ${keys.toLocaleString('en-US')} keys, one process per case, ${pinning(cases)})`,
    '',
    table(['case', 'median per op', 'ratio to raw lru get', 'range over rounds'], rows, ['l', 'r', 'r', 'r']),
  ].join('\n');
  const targets = [
    {
      name: 'memory hit <= 1.5x awaited raw lru-cache get',
      met: ours / base <= 1.5,
      detail: `${ratio(ours / base)} (${ns(ours)} vs ${ns(base)})`,
    },
    {
      name: 'memory hit faster than every peer',
      met: ours < fastestPeerNs,
      detail: `stampede ${ns(ours)}; fastest peer ${fastestPeer.label} ${ns(fastestPeerNs)} (${ratio(fastestPeerNs / ours)} stampede's)`,
    },
  ];
  return { markdown, targets };
}
