// Hit-path benchmark: a hit through getOrCompute on the memory cache against an awaited raw
// lru-cache get, and a getOrComputeWith hit with and without earlyRefresh, in the same run, and the overhead a herd of 10,000 callers adds beyond the fill's
// own time. Prints medians of several rounds and their ratio.
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { getOrCompute, getOrComputeWith, invalidate } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { LRUCache } from 'lru-cache';

// One CPU for the whole run (this thread and any it starts): the cores of a shared VM can differ a
// lot (one ran this loop 1.8x slower than the other here), and a process the scheduler moves
// between them mid-run gives each case a different mix.
const cpu = availableParallelism() - 1;
let pinned = false;
try {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
  pinned = true;
} catch {
  // taskset (util-linux) missing: the scheduler places the process.
}

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 1_000_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const KEYS = 1_000;
const keys = Array.from({ length: KEYS }, (_, i) => `bookmark:${i}`);

const raw = new LRUCache({ max: 10_000 });
for (const key of keys) raw.set(key, { count: 1 });
const cache = createMemoryCache({ max: 10_000 });
const fill = () => ({ count: 1 });
// Entries as a 10 s fill would have written them, 5 minutes from expiry: close enough (within
// 36.7 x delta) that the earlyRefresh row pays the whole XFetch draw, one random() and one Math.log,
// on every hit, where a refresh stays out of reach (probability e^-24 per hit at the end of the run).
const now = Date.now();
for (const key of keys) {
  const entry = {
    value: { count: 1 },
    createdAt: now,
    freshUntil: now + 300_000,
    staleUntil: now + 360_000,
    delta: 10_000,
  };
  cache.set(key, entry, { ttl: 360_000 });
}
const withOptions = { ttl: '5m', staleWhileRevalidate: '1m' };
// The same hit with and without earlyRefresh (the worst case: a draw on every hit, see above).
const plainOptions = { ttl: '5m' };
const earlyOptions = { ttl: '5m', earlyRefresh: true };

const cases = {
  'raw lru-cache get (awaited)': async () => {
    let sink = 0;
    for (let i = 0; i < ITERATIONS; i++) sink += (await raw.get(keys[i % KEYS])).count;
    return sink;
  },
  'getOrCompute hit (memory)': async () => {
    let sink = 0;
    for (let i = 0; i < ITERATIONS; i++)
      sink += (await getOrCompute(cache, keys[i % KEYS], '5m', fill)).count;
    return sink;
  },
  'getOrComputeWith hit (memory, SWR options)': async () => {
    let sink = 0;
    for (let i = 0; i < ITERATIONS; i++)
      sink += (await getOrComputeWith(cache, keys[i % KEYS], withOptions, fill)).count;
    return sink;
  },
  'getOrComputeWith hit (memory, ttl only)': async () => {
    let sink = 0;
    for (let i = 0; i < ITERATIONS; i++)
      sink += (await getOrComputeWith(cache, keys[i % KEYS], plainOptions, fill)).count;
    return sink;
  },
  'getOrComputeWith earlyRefresh hit (memory)': async () => {
    let sink = 0;
    for (let i = 0; i < ITERATIONS; i++)
      sink += (await getOrComputeWith(cache, keys[i % KEYS], earlyOptions, fill)).count;
    return sink;
  },
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
process.stdout.write(
  `hit-path benchmark: ${ROUNDS} rounds x ${ITERATIONS} ops, interleaved, order rotated, ${pinned ? `pinned to CPU ${cpu}` : 'not pinned'}\n`,
);
// Each round starts one case later, so that no case always runs right after the same other one
// (a case's cost shifts by tens of ns with what ran before it: JIT state, GC).
const entries = Object.entries(cases);
for (let round = 0; round < ROUNDS; round++) {
  const order = [...entries.slice(round % entries.length), ...entries.slice(0, round % entries.length)];
  for (const [name, run] of order) {
    globalThis.gc?.();
    const t0 = process.hrtime.bigint();
    await run();
    samples[name].push(Number(process.hrtime.bigint() - t0) / ITERATIONS);
  }
  process.stdout.write(`  round ${round + 1}/${ROUNDS} done\n`);
}
const base = median(samples['raw lru-cache get (awaited)']);
console.log('\n| case | median ns/op | ratio to raw lru get |\n|---|---:|---:|');
for (const name of Object.keys(cases)) {
  const m = median(samples[name]);
  console.log(`| ${name} | ${m.toFixed(1)} | ${(m / base).toFixed(2)}x |`);
}
const ratio = median(samples['getOrCompute hit (memory)']) / base;
console.log(
  `\ntarget: getOrCompute hit <= 1.5x raw lru get: ${ratio <= 1.5 ? 'met' : 'MISSED'} (${ratio.toFixed(2)}x)`,
);
const earlyRatio =
  median(samples['getOrComputeWith earlyRefresh hit (memory)']) /
  median(samples['getOrComputeWith hit (memory, ttl only)']);
console.log(
  `target: getOrComputeWith earlyRefresh hit <= 1.2x the same hit without it: ${earlyRatio <= 1.2 ? 'met' : 'MISSED'} (${earlyRatio.toFixed(2)}x)`,
);

// A herd of 10,000 on an expired key, 50 ms fill: time from the first call until the last caller
// has its value, minus the fill's own measured time.
const HERD = 10_000;
const herdCache = createMemoryCache({ max: 10 });
const overheads = [];
for (let round = 0; round < ROUNDS; round++) {
  await invalidate(herdCache, 'hot');
  let fillMs = 0;
  let fills = 0;
  const fillHot = async () => {
    fills++;
    const t = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 50));
    fillMs = performance.now() - t;
    return { count: 1 };
  };
  globalThis.gc?.();
  const t0 = performance.now();
  const callers = [];
  for (let i = 0; i < HERD; i++) callers.push(getOrCompute(herdCache, 'hot', '5m', fillHot));
  await Promise.all(callers);
  const total = performance.now() - t0;
  if (fills !== 1) throw new Error(`herd ran ${fills} fills`);
  overheads.push(total - fillMs);
}
const herdOverhead = median(overheads);
console.log(
  `\nherd of ${HERD.toLocaleString()} callers, 50 ms fill: 1 fill per round, median overhead beyond the fill ${herdOverhead.toFixed(2)} ms (rounds: ${overheads.map((o) => o.toFixed(1)).join(', ')})`,
);
console.log(`target: herd overhead <= 10 ms: ${herdOverhead <= 10 ? 'met' : 'MISSED'}`);
