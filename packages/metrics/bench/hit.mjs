// The cost of a getOrCompute hit on the memory cache with and without @stampede/metrics registered.
// Counters are read from core at scrape time, so the ratio should stay ~1.00.
// Run after `pnpm --filter @stampede/metrics build`: node bench/hit.mjs [callsPerRound] [rounds]
import { getOrCompute } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { Registry } from 'prom-client';
import { registerStampedeMetrics } from '../dist/index.js';

// Many short alternating rounds: on a shared machine the noise between rounds dwarfs the effect.
const calls = Number(process.argv[2] ?? 50_000);
const rounds = Number(process.argv[3] ?? 41);
const cache = createMemoryCache({ name: 'bench' });
const key = 'bench:hot';
const fill = () => 'value';

/** Nanoseconds per awaited hit over `calls` calls, after a short untimed run (settles GC and the JIT). */
async function measure() {
  for (let i = 0; i < 5_000; i++) await getOrCompute(cache, key, '1h', fill);
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await getOrCompute(cache, key, '1h', fill);
  return Number(process.hrtime.bigint() - started) / calls;
}

/** {@link measure} without metrics, after the same registration work (so allocation and GC match both sides). */
async function measureWithout() {
  registerStampedeMetrics({ registry }).unregister();
  return measure();
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

await getOrCompute(cache, key, '1h', fill);
await measure(); // warm up the JIT on both paths before timing
const registry = new Registry();
let metrics = registerStampedeMetrics({ registry });
await measure();
metrics.unregister();

const without = [];
const withMetrics = [];
const ratios = [];
const controls = [];
for (let round = 0; round < rounds; round++) {
  // Three runs in a random order: without, with, and a second without as an A/A control of the noise.
  const runs = { plain: 0, instrumented: 0, control: 0 };
  const order = Object.keys(runs).sort(() => Math.random() - 0.5);
  for (const run of order) {
    if (run === 'instrumented') {
      metrics = registerStampedeMetrics({ registry });
      runs.instrumented = await measure();
      metrics.unregister();
    } else {
      runs[run] = await measureWithout();
    }
  }
  without.push(runs.plain);
  withMetrics.push(runs.instrumented);
  ratios.push(runs.instrumented / runs.plain);
  controls.push(runs.control / runs.plain);
}

metrics = registerStampedeMetrics({ registry });
const scrapeStarted = process.hrtime.bigint();
const text = await registry.metrics();
const scrapeUs = Number(process.hrtime.bigint() - scrapeStarted) / 1000;
metrics.unregister();

console.log(`getOrCompute memory hit, ${rounds} rounds x ${calls} calls (median):`);
console.log(`  without metrics  ${median(without).toFixed(1)} ns/op`);
console.log(`  with metrics     ${median(withMetrics).toFixed(1)} ns/op`);
console.log(`  ratio            ${median(ratios).toFixed(3)} (with / without, median of per-round ratios)`);
console.log(`  noise (A/A)      ${median(controls).toFixed(3)} (without / without, same method)`);
console.log(`  one scrape       ${scrapeUs.toFixed(0)} us (${text.length} bytes)`);
