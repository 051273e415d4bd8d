// Scenario 8: memory in front of Redis. (a) An L1 hit through a tiered cache, ns/op beside an
// awaited raw lru-cache get and bentocache's L1 + L2 + bus, each case in its own process, on a
// redis-server of the bench's own so that `INFO commandstats` counts only these hits' commands.
// (b) Invalidation propagation: P processes hold a key in L1; one invalidates it after the
// "database" changed; the time from its `invalidate` resolving until every other process's read
// returns the new value (each reads every 1 ms), over interleaved rounds.
import { fileURLToPath } from 'node:url';
import { startChild } from '../child.mjs';
import { config } from '../config.mjs';
import { rawLru } from '../peers/raw-lru.mjs';
import { tieredBusVariants, tieredHitCases, tieredMissing } from '../peers/tiered.mjs';
import { commandDelta, commandStats, connect, randomPrefix, startPrivateRedis } from '../redis.mjs';
import { median, ms, ns, percentile, pinning, progress, ratio, rotate, table } from '../stats.mjs';

const hitChild = fileURLToPath(new URL('../hit-child.mjs', import.meta.url));
const busChild = fileURLToPath(new URL('../tiered-child.mjs', import.meta.url));

export async function tieredScenario({ url }) {
  if (tieredMissing !== undefined) {
    return {
      markdown: `### 8. Tiered cache: not run (${tieredMissing})`,
      targets: [{ name: 'tiered cache scenario ran', met: false, detail: tieredMissing }],
    };
  }
  const hit = await hitPart();
  const propagation = await propagationPart(url);
  return {
    markdown: [hit.markdown, '', propagation.markdown].join('\n'),
    targets: [...hit.targets, ...propagation.targets],
  };
}

async function hitPart() {
  const { rounds, sampleMs, keys } = config.hit;
  let server;
  try {
    server = await startPrivateRedis();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      markdown: `### 8a. Tiered L1 hit: not run (${reason})`,
      targets: [{ name: 'tiered L1 hit scenario ran', met: false, detail: reason }],
    };
  }
  const admin = connect(server.url);
  const context = { url: server.url, prefix: randomPrefix() };
  const cases = [
    { id: 'raw', label: rawLru.label },
    ...tieredHitCases.map((c, i) => ({ id: `tiered#${i}`, label: c.label, kind: c.kind })),
  ];
  try {
    for (const c of cases) {
      c.worker = startChild(hitChild, { pin: true });
      const { n } = await c.worker.ask({ type: 'setup', id: c.id, keys, sampleMs, context }, 'ready', 60_000);
      c.n = n;
      c.samples = [];
      c.misses = 0;
      c.commands = 0;
      progress(`tiered: ${c.label}: ${n.toLocaleString('en-US')} ops per sample`);
    }
    for (let round = 0; round < rounds; round++) {
      for (const c of rotate(cases, round)) {
        const before = await commandStats(admin);
        const { nsPerOp, misses } = await c.worker.ask({ type: 'sample' }, 'sample', 60_000);
        const delta = commandDelta(before, await commandStats(admin));
        c.samples.push(nsPerOp);
        c.misses += misses;
        c.commands += Object.values(delta).reduce((sum, calls) => sum + calls, 0);
      }
      progress(`tiered: hit round ${round + 1}/${rounds} done`);
    }
  } finally {
    await Promise.all(cases.map((c) => c.worker?.stop()));
    await admin.quit();
    await server.stop();
  }
  const base = median(cases[0].samples);
  const rows = cases.map((c) => {
    const m = median(c.samples);
    const label = c.misses > 0 ? `${c.label} (**${c.misses} calls were not hits**)` : c.label;
    const commands =
      c.id === 'raw'
        ? 'n/a'
        : `${c.commands.toLocaleString('en-US')} in ${(c.n * rounds).toLocaleString('en-US')} hits`;
    return [label, ns(m), ratio(m / base), commands];
  });
  const ours = cases.find((c) => c.kind === 'stampede');
  const oursNs = median(ours.samples);
  return {
    markdown: [
      `### 8a. Tiered L1 hit (${rounds} interleaved rounds, ~${sampleMs} ms per sample, ${keys.toLocaleString('en-US')} keys, one process per case, ${pinning(cases)}, a redis-server of the bench's own)`,
      '',
      table(
        [
          'case',
          'median per op',
          'ratio to raw lru get',
          'Redis commands during the hits (INFO commandstats)',
        ],
        rows,
        ['l', 'r', 'r', 'r'],
      ),
    ].join('\n'),
    targets: [
      {
        name: 'tiered L1 hit <= 2x awaited raw lru-cache get, 0 Redis commands',
        met: oursNs / base <= 2 && ours.commands === 0 && ours.misses === 0,
        detail: `${ratio(oursNs / base)} (${ns(oursNs)} vs ${ns(base)}), ${ours.commands} Redis commands`,
      },
    ],
  };
}

async function propagationPart(url) {
  const { processes, rounds } = config.tiered;
  const prefix = randomPrefix();
  const admin = connect(url);
  const groups = tieredBusVariants.map((variant) => ({
    variant,
    dbKey: `${prefix}db:${variant.id}`,
    key: `tiered:${variant.id}`,
    children: Array.from({ length: processes }, () => startChild(busChild)),
    samples: [],
    failures: 0,
  }));
  try {
    for (const g of groups) {
      await admin.set(g.dbKey, '0');
      await Promise.all(
        g.children.map(({ ask }) =>
          ask(
            {
              type: 'setup',
              variant: g.variant.id,
              url,
              prefix: `${prefix}${g.variant.id}:`,
              dbKey: g.dbKey,
            },
            'setup-done',
          ),
        ),
      );
    }
    for (let round = 0; round <= rounds; round++) {
      for (const g of rotate(groups, round)) {
        const previous = round;
        const warm = await Promise.all(
          g.children.map(({ ask }) => ask({ type: 'warm', key: g.key, version: previous }, 'warmed', 10_000)),
        );
        if (warm.some((w) => !w.ok))
          throw new Error(`${g.variant.id}: replicas did not agree on version ${previous}`);
        await admin.set(g.dbKey, String(previous + 1));
        const [writer, ...watchers] = g.children;
        await Promise.all(
          watchers.map(({ ask }) => ask({ type: 'watch', key: g.key, version: previous + 1 }, 'watching')),
        );
        const seen = watchers.map(({ next }) =>
          next('seen', 10_000).then((m) => ({ ok: m.ok, at: performance.now() })),
        );
        await writer.ask({ type: 'invalidate', key: g.key }, 'invalidated', 10_000);
        const resolvedAt = performance.now();
        const answers = await Promise.all(seen);
        if (round === 0) continue; // warm-up: connections, subscriptions, JIT
        if (answers.some((a) => !a.ok)) g.failures++;
        else g.samples.push(Math.max(0, ...answers.map((a) => a.at - resolvedAt)));
      }
      if (round > 0) progress(`tiered: propagation round ${round}/${rounds} done`);
    }
  } finally {
    for (const g of groups) await Promise.all(g.children.map((c) => c.stop()));
    await admin.quit();
  }
  const rows = groups.map((g) => [
    g.variant.label,
    ms(percentile(g.samples, 50)),
    ms(percentile(g.samples, 99)),
    ms(Math.max(...g.samples)),
    g.failures > 0 ? `${g.failures} rounds never saw the new value within 5 s` : '0',
  ]);
  const ours = groups.find((g) => g.variant.id === 'stampede-tiered');
  const p99 = percentile(ours.samples, 99);
  return {
    markdown: [
      `### 8b. Invalidation propagation (${processes} processes on one Redis, ${rounds} rounds; time from invalidate resolving on one process until the ${processes - 1} others read the new value, reading every 1 ms)`,
      '',
      table(['library', 'p50', 'p99', 'slowest', 'rounds that failed'], rows, ['l', 'r', 'r', 'r', 'r']),
    ].join('\n'),
    targets: [
      {
        name: `tiered invalidation reaches ${processes - 1} other processes: p99 <= 10 ms`,
        met: ours.failures === 0 && p99 <= 10,
        detail: `p99 ${ms(p99)} over ${ours.samples.length} rounds${ours.failures > 0 ? `, ${ours.failures} failed` : ''}`,
      },
    ],
  };
}
