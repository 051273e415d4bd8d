// Scenario 5: stale-while-revalidate at expiry. A key is filled, its ttl passes (still within the
// grace), then N callers read it: half at once, half in the middle of the refresh. Reports the
// callers' read latency, how many were served the stale value, and how many fills ran, above a
// floor row that has no cache (see swrFloor).
import { getHeapSpaceStatistics } from 'node:v8';
import { config } from '../config.mjs';
import { pinThisProcess } from '../machine.mjs';
import { median, ms, percentile, progress, ratio, rotate, sleep, table } from '../stats.mjs';
import { fillsText } from './herd.mjs';

async function readDuringRefresh(instance, key, callers, fillMs) {
  let fills = 0;
  const fill = async () => {
    fills++;
    await sleep(fillMs);
    return { version: 1 };
  };
  const latencies = new Float64Array(callers);
  let stale = 0;
  const burst = (from, to) => {
    const pending = [];
    for (let i = from; i < to; i++) {
      const start = performance.now();
      pending.push(
        instance.get(key, fill).then((value) => {
          latencies[i] = performance.now() - start;
          if (value.version === 0) stale++;
        }),
      );
    }
    return pending;
  };
  const half = Math.floor(callers / 2);
  const first = burst(0, half);
  await sleep(fillMs / 2);
  const second = burst(half, callers);
  await Promise.all([...first, ...second]);
  await sleep(fillMs + 30); // let a background refresh finish before counting fills
  return { fills, stale, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** `count` fresh hits of one key, in concurrent bursts of `burst` (a server's traffic before expiry). */
async function serveFreshHits(instance, count, burst) {
  const fill = () => ({ version: 0 });
  await instance.get('swr:fresh', fill);
  for (let served = 0; served < count; served += burst) {
    const pending = [];
    for (let i = 0; i < burst; i++) pending.push(instance.get('swr:fresh', fill));
    await Promise.all(pending);
  }
}

/**
 * Bytes of young-generation heap each call of `instance.get(key, fill)` allocates before it
 * returns, in compiled code: the least of `samples` runs of `calls` calls (the promises kept and
 * awaited only after the run, so that only the library's own allocations count; an asynchronous
 * library allocates more once its continuations run), after `warmCalls` calls of the same kind. The
 * least, because V8 may recompile a path mid-measurement (here when the coarse clock's thread
 * starts), and a run of code not yet recompiled allocates every intermediate number. A run a
 * garbage collection interrupted is not counted, nor one that ended past `deadline` (a
 * `performance.now()` time); `undefined` if none ran through.
 *
 * With `renew` (an async function answering `{ key, deadline }`: a key it has just written and when
 * that entry stops reading as it was written), the calls read `renew`'s key, and a new one is asked
 * for whenever the next run might end past the deadline (the longest run so far), so a library
 * slower to measure than the entry lives still reads entries as written; a run that ended past its
 * deadline all the same is not counted. Without it, `key` until `deadline`, then the measurement
 * stops (its calls may never settle past it: see measureHeap).
 */
async function heapPerCall(
  instance,
  fill,
  calls,
  { key, deadline = Number.POSITIVE_INFINITY, renew, warmCalls = 50_000, samples = 20 },
) {
  let target = renew === undefined ? { key, deadline } : await renew();
  let longestRun = 0;
  // Whether a run may start now (after a new entry, where `renew` gives them).
  const ready = async () => {
    if (renew !== undefined && performance.now() + longestRun >= target.deadline) target = await renew();
    return performance.now() < target.deadline;
  };
  const promises = new Array(calls);
  for (let done = 0; done < warmCalls && (await ready()); done += calls) {
    const startedAt = performance.now();
    for (let i = 0; i < calls; i++) promises[i] = instance.get(target.key, fill);
    await Promise.all(promises);
    longestRun = Math.max(longestRun, performance.now() - startedAt);
  }
  let least;
  for (let sample = 0; sample < samples && (await ready()); sample++) {
    const startedAt = performance.now();
    const before = youngBytes();
    for (let i = 0; i < calls; i++) promises[i] = instance.get(target.key, fill);
    const allocated = youngBytes() - before;
    // A run that ended past the deadline may have read something else (see measureHeap). Without
    // `renew` its calls may not settle, so the measurement ends; with it, an asynchronous library
    // may judge the entry only in a continuation, so the run ends once its calls have settled.
    if (renew === undefined && performance.now() >= target.deadline) break;
    await Promise.all(promises);
    longestRun = Math.max(longestRun, performance.now() - startedAt);
    if (renew !== undefined && performance.now() >= target.deadline) continue;
    if (allocated >= 0 && !(allocated >= least)) least = allocated;
  }
  return least === undefined ? undefined : least / calls;
}

// How long before a fresh entry's ttl ends its runs stop (a library may read a coarser or earlier
// clock than performance.now() when it dates the entry or judges it).
const FRESH_MARGIN_MS = 100;

const youngBytes = () =>
  getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_used_size ?? 0;

/**
 * What each library allocates per fresh hit and per stale read served during a refresh, measured
 * after the rounds. Allocation is what a burst pays beyond its instructions: the young
 * generation's pages, and the collections that empty it.
 */
async function measureHeap(contenders, callers, ttlMs, graceMs) {
  const fresh = () => ({ version: 0 });
  for (const c of contenders) {
    const startedAt = performance.now();
    // Fresh hits read a key written just before (and again, under a new name, before a run could
    // outlast it). 'swr:fresh', written before the rounds, had long expired: the first run read it
    // stale and refreshed it, and a library whose measurement outlasted that refresh by more than
    // the ttl read it stale again (bentocache, 1.4 s with 3,000 callers on a loaded machine).
    let written = 0;
    const renew = async () => {
      const key = `swr:fresh:${written++}`;
      const writtenAt = performance.now();
      await c.instance.get(key, fresh);
      return { key, deadline: writtenAt + ttlMs - FRESH_MARGIN_MS };
    };
    c.heap = { fresh: await heapPerCall(c.instance, fresh, callers, { renew }) };
    // Only for libraries that served stale reads in the rounds (for the others every read is a
    // miss). The refresh lasts until every read is made, so all of them are stale reads.
    if (c.results.some(({ stale }) => stale > 0)) {
      const key = 'swr:heap';
      const writtenAt = performance.now();
      await c.instance.get(key, fresh);
      await sleep(ttlMs + 150);
      let release;
      const refreshed = new Promise((resolve) => {
        release = resolve;
      });
      const refresh = async () => {
        await refreshed;
        return { version: 1 };
      };
      // Past its grace the entry is a miss, and a miss waits for the held refresh: a slow library
      // on a loaded machine would then wait forever (the process exits with code 13, an unsettled
      // top-level await). The measurement stops short of the grace's end, and the refresh is
      // released then whatever happens.
      const deadline = writtenAt + ttlMs + graceMs - 500;
      const safety = setTimeout(release, Math.max(0, deadline - performance.now()));
      c.heap.stale = await heapPerCall(c.instance, refresh, callers, { key, deadline });
      clearTimeout(safety);
      release();
    }
    progress(`swr: heap of ${c.peer.id} measured in ${ms(performance.now() - startedAt)}`);
  }
}

const bytes = (value) => (value === undefined ? 'n/a' : `${Math.round(value)} B`);

export async function swrScenario(peers) {
  // Every library's rounds run in this process, pinned to one CPU as the hit cases are: this VM's
  // two vCPUs ran the same loop up to 1.8x apart, and a process the scheduler moves between them
  // gave p99s 10-25% apart from round to round. On an AMD EPYC VM, three pinned processes gave p99
  // ratios of 0.99x-1.02x against 0.73x-1.07x unpinned (session 43); on an Intel Xeon VM, pinned
  // runs still ranged 0.81x-1.36x (session 44; docs/benchmarks.md, results 5).
  const pinned = pinThisProcess();
  try {
    return await measureSwr(peers, pinned.cpu);
  } finally {
    pinned.restore();
  }
}

/**
 * The table's last row: no cache at all, every read answered with one promise settled before the
 * rounds, so no library does less work per read. Its latencies are the bench's own share of a
 * burst (the loop's clock readings and `.then` callbacks, and the `Promise.all` over them), the
 * floor under every library's row. A shared pending answer splits the same cost differently (its
 * `.then`s are cheaper in the loop, its callbacks wait behind `Promise.all`'s jobs) and is not
 * below it at p99 by more than the noise. In ten SWR-only runs (session 44) its p99 was
 * 0.68x-0.97x async-cache-dedupe's, median 0.81x, and 0.62x-1.06x in eight more (session 46):
 * about the most any library could lead by, and about as much as one run's p99s move from run to
 * run (docs/benchmarks.md, results 5).
 */
const swrFloor = {
  id: 'floor',
  label: 'floor: one settled promise, no cache',
  swr: {
    feature: 'none (answers every read with one settled promise)',
    create: () => {
      const answer = Promise.resolve({ version: 0 });
      return { get: () => answer };
    },
  },
};

async function measureSwr(peers, cpu) {
  const { rounds, warmupRounds, freshHits, callers, ttlMs, graceMs } = config.swr;
  const { fillMs } = config;
  const contenders = [...peers, swrFloor].map((peer) => ({
    peer,
    instance: peer.swr?.create({ ttlMs, graceMs }),
    results: [],
  }));
  const live = contenders.filter((c) => c.instance !== undefined);
  for (const c of live) await serveFreshHits(c.instance, freshHits, callers);
  // Warm-up rounds first, the same for every library and not counted: a burst of 500 calls that
  // takes a fraction of a millisecond once compiled takes several before the JIT has seen it, so the
  // first rounds measure each library's compilation rather than its stale reads.
  for (let round = -warmupRounds; round < rounds; round++) {
    const key = `swr:${round}`;
    for (const c of live) await c.instance.get(key, () => ({ version: 0 }));
    await sleep(ttlMs + 150);
    for (const c of rotate(live, round + warmupRounds)) {
      const result = await readDuringRefresh(c.instance, key, callers, fillMs);
      if (round >= 0) c.results.push(result);
    }
    progress(round < 0 ? 'swr: warm-up round done' : `swr: round ${round + 1}/${rounds} done`);
  }
  await measureHeap(live, callers, ttlMs, graceMs);
  const rows = contenders.map(({ peer, results, heap }) => {
    if (peer.swr === undefined) return [peer.label, 'n/a', 'n/a', 'n/a', 'n/a', 'n/a', 'n/a', 'n/a', 'n/a'];
    const p99 = median(results.map((r) => r.p99));
    return [
      peer.label,
      peer.swr.feature,
      fillsText(results.map((r) => r.fills)),
      `${median(results.map((r) => r.stale)).toLocaleString('en-US')} / ${callers.toLocaleString('en-US')}`,
      ms(median(results.map((r) => r.p50))),
      ms(p99),
      ratio(p99 / fillMs),
      bytes(heap?.stale),
      bytes(heap?.fresh),
    ];
  });
  const markdown = [
    `### 5. Stale-while-revalidate at expiry (ttl ${ms(ttlMs)}, grace ${ms(graceMs)}, ${callers.toLocaleString('en-US')} readers in two bursts during a ${fillMs} ms refresh, ${rounds} rounds after ${freshHits.toLocaleString('en-US')} fresh hits and ${warmupRounds} warm-up rounds, ${cpu === undefined ? 'not pinned (taskset unavailable)' : `pinned to CPU ${cpu}`})`,
    '',
    table(
      [
        'library',
        'feature used',
        'fills (refreshes)',
        'readers served stale (median)',
        'p50 read latency',
        'p99 read latency',
        'p99 / fill time',
        'heap per stale read',
        'heap per fresh hit',
      ],
      rows,
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
  ].join('\n');
  return { markdown, targets: [] };
}
