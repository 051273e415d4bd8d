// A herd of 10,000 concurrent requests on an expired key: once with plain cache-aside (no
// protection) and once through getOrCompute. The "database" is a pool of 100 connections where
// each query takes 20 ms, so every extra query costs real time.
import { getOrCompute, resetStats, stats } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';

const HERD = Number(process.env.HERD ?? 10_000);
const POOL = 100;
const QUERY_MS = 20;

function database() {
  let queries = 0;
  let busy = 0;
  const queue = [];
  const release = () => {
    busy--;
    queue.shift()?.();
  };
  return {
    get queries() {
      return queries;
    },
    async countBookmarks() {
      queries++;
      if (busy >= POOL) await new Promise((resolve) => queue.push(resolve));
      busy++;
      await new Promise((resolve) => setTimeout(resolve, QUERY_MS));
      release();
      return 1_234;
    },
  };
}

async function herd(label, request) {
  const started = performance.now();
  const values = await Promise.all(Array.from({ length: HERD }, request));
  const ms = performance.now() - started;
  if (!values.every((v) => v === 1_234)) throw new Error('a caller got a wrong value');
  return { label, ms };
}

console.log(`stampede terminal demo: ${HERD.toLocaleString()} concurrent requests on an expired key`);
console.log(`database: ${POOL} connections, ${QUERY_MS} ms a query\n`);

// 1. Cache-aside with no protection: every miss queries the database.
const plainDb = database();
const plain = new Map();
const unprotected = await herd('no protection (cache-aside)', async () => {
  const hit = plain.get('bookmark_count');
  if (hit !== undefined) return hit;
  const value = await plainDb.countBookmarks();
  plain.set('bookmark_count', value);
  return value;
});

// 2. The same herd through getOrCompute.
const db = database();
const cache = createMemoryCache();
resetStats();
const protectedRun = await herd('getOrCompute (stampede)', () =>
  getOrCompute(cache, 'bookmark_count', '30s', () => db.countBookmarks()),
);
const s = stats();

const rows = [
  [unprotected.label, plainDb.queries, unprotected.ms],
  [protectedRun.label, db.queries, protectedRun.ms],
];
console.log('| run | database queries | wall time |');
console.log('|---|---:|---:|');
for (const [label, queries, ms] of rows)
  console.log(`| ${label} | ${queries.toLocaleString()} | ${ms.toFixed(1)} ms |`);
console.log(
  `\nstampede stats: fills=${s.fills} coalescedWaits=${s.coalescedWaits} misses=${s.misses} hits=${s.hits}`,
);
console.log(`overhead beyond the one ${QUERY_MS} ms query: ${(protectedRun.ms - QUERY_MS).toFixed(1)} ms`);
