// `pnpm bench`: every scenario for stampede, its peers and a no-protection baseline, in one run.
// Markdown tables (medians of interleaved rounds, and ratios) go to stdout, progress to stderr.
// BENCH_ONLY=hit,herd,... runs some scenarios; BENCH_OUT=file also writes the report to a file.
import { writeFileSync } from 'node:fs';
import { config, enabled } from './config.mjs';
import { machine } from './machine.mjs';
import { peers } from './peers/index.mjs';
import { unreachable } from './redis.mjs';
import { commandsScenario } from './scenarios/commands.mjs';
import { failingScenario } from './scenarios/failing.mjs';
import { fleetScenario } from './scenarios/fleet.mjs';
import { herdScenario } from './scenarios/herd.mjs';
import { hitScenario } from './scenarios/hit.mjs';
import { memoryScenario } from './scenarios/memory.mjs';
import { outageScenario } from './scenarios/outage.mjs';
import { shutdownScenario } from './scenarios/shutdown.mjs';
import { steadyScenario } from './scenarios/steady.mjs';
import { swrScenario } from './scenarios/swr.mjs';
import { tagsScenario } from './scenarios/tags.mjs';
import { tieredScenario } from './scenarios/tiered.mjs';
import { progress, table } from './stats.mjs';

let strayRejections = 0;
process.on('unhandledRejection', () => {
  // Some libraries leave a promise unobserved when a fill fails; that is theirs, not a bench fault.
  strayRejections++;
});

const out = [];
const print = (text = '') => {
  out.push(text);
  process.stdout.write(`${text}\n`);
};

const started = performance.now();
const info = await machine(config.redisUrl);
print('## Results');
print();
print(
  `Machine: ${info.cpu}, ${info.nproc} cores (nproc), ${info.memory}; Node ${process.version}; Redis ${info.redis}; ${info.date}.`,
);
print('Figures are medians of interleaved rounds and ratios within this one run.');
print();

const redisDown = await unreachable(config.redisUrl);
if (redisDown !== undefined) progress(`Redis at ${config.redisUrl} is not reachable (${redisDown})`);
const stampede = peers.find((p) => p.id === 'stampede');
if (stampede.redisMissing !== undefined) {
  progress(`stampede redis adapter not available: ${stampede.redisMissing}`);
}

const scenarios = [
  ['hit', () => hitScenario(peers)],
  ['herd', () => herdScenario(peers)],
  ['failing', () => failingScenario(peers)],
  ['fleet', () => fleetScenario({ url: config.redisUrl }), true],
  ['swr', () => swrScenario(peers)],
  ['commands', () => commandsScenario({ url: config.redisUrl }), true],
  ['memory', () => memoryScenario()],
  ['outage', () => outageScenario(peers)],
  ['steady', () => steadyScenario({ url: config.redisUrl }), true],
  ['tags', () => tagsScenario({ url: config.redisUrl }), true],
  ['tiered', () => tieredScenario({ url: config.redisUrl }), true],
  ['shutdown', () => shutdownScenario({ url: config.redisUrl }), true],
];

const targets = [];
for (const [name, run, needsRedis] of scenarios) {
  if (!enabled(name)) continue;
  if (needsRedis && redisDown !== undefined) {
    print(`### ${name}: skipped, Redis at ${config.redisUrl} is not reachable (${redisDown})`);
    print();
    continue;
  }
  const t0 = performance.now();
  progress(`${name}: starting`);
  try {
    const result = await run();
    print(result.markdown);
    targets.push(...result.targets);
  } catch (error) {
    print(`### ${name}: failed: ${error instanceof Error ? error.stack : String(error)}`);
    targets.push({ name: `${name} scenario ran`, met: false, detail: 'it threw (see above)' });
  }
  print();
  progress(`${name}: done in ${((performance.now() - t0) / 1_000).toFixed(1)} s`);
}

if (targets.length > 0) {
  print('### Targets');
  print();
  print(
    table(
      ['target', 'result', 'measured'],
      targets.map((t) => [t.name, t.met ? 'met' : '**MISSED**', t.detail]),
    ),
  );
  print();
}
print(
  `Whole run: ${((performance.now() - started) / 1_000).toFixed(0)} s` +
    (strayRejections > 0 ? `; ${strayRejections} unhandled rejections from libraries were ignored.` : '.'),
);
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${out.join('\n')}\n`);
process.exit(process.env.BENCH_STRICT === '1' && targets.some((t) => !t.met) ? 1 : 0);
