// Every knob of the benchmark, with an environment override (BENCH_*). Defaults keep a full run
// under about 5 minutes on 2 cores.
const int = (name, fallback) => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a number >= 0; got ${raw}`);
  return value;
};

export const config = {
  /** Which scenarios run: comma-separated names (hit, herd, failing, fleet, swr, commands, memory, tiered, outage, steady, tags, shutdown). */
  only: (process.env.BENCH_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  /** The fill's own duration in the herd, failing and SWR scenarios (the fleet has its own). */
  fillMs: int('BENCH_FILL_MS', 50),
  hit: {
    rounds: int('BENCH_HIT_ROUNDS', 7),
    /** Each sample runs about this long (iterations are calibrated per contender). */
    sampleMs: int('BENCH_HIT_SAMPLE_MS', 150),
    keys: 1_000,
  },
  herd: { rounds: int('BENCH_HERD_ROUNDS', 5), callers: int('BENCH_HERD_CALLERS', 10_000) },
  failing: {
    rounds: int('BENCH_FAILING_ROUNDS', 3),
    callers: int('BENCH_FAILING_CALLERS', 1_000),
    capMs: int('BENCH_FAILING_CAP_MS', 15_000),
  },
  fleet: {
    rounds: int('BENCH_FLEET_ROUNDS', 7),
    processes: int('BENCH_FLEET_PROCESSES', 4),
    callers: int('BENCH_FLEET_CALLERS', 250),
    /** The fleet's fill: 200 ms, the figure the Upstash and tiered-cache targets are stated for. */
    fillMs: int('BENCH_FLEET_FILL_MS', 200),
    /** Only these Redis variants (ids, comma-separated), for development. */
    variants: (process.env.BENCH_FLEET_VARIANTS ?? '').split(',').filter(Boolean),
    /** Rounds of the second pass, whose fill takes 1 ms (the subscribe race's worst case). */
    fastRounds: int('BENCH_FLEET_FAST_ROUNDS', 7),
    /**
     * Extra fleets started for the cold-start target alone (the push variant only, one herd each):
     * a cold start is one herd per start, so its target takes the median over the main run's start
     * and these.
     */
    coldStarts: int('BENCH_FLEET_COLD_STARTS', 4),
    fastFillMs: 1,
    /** Extra node flags for the children, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
    childExecArgv: (process.env.BENCH_CHILD_EXEC_ARGV ?? '').split(' ').filter(Boolean),
  },
  swr: {
    /**
     * Rounds measured: each gives every library's p50 and p99 of its 1,000 readers, and the table
     * shows the median of each. The p99 of a round is set by the bench's own work (the callers' loop
     * and a Promise.all over their promises) more than by the library. Before the scenario was
     * pinned to one CPU it varied by 10-25% from round to round, and with 5 rounds two libraries
     * within 10% of each other changed order from one process to the next.
     */
    rounds: int('BENCH_SWR_ROUNDS', 15),
    /**
     * Rounds run first and not counted, so that every library is compiled before it is measured. A
     * round's first miss and first stale burst take paths the fresh hits never did, and V8 throws
     * away optimized code that meets one (stampede's `afterRead`, measured with --trace-deopt); it
     * optimizes it again only after some thousands more calls, and a round holds a thousand stale
     * reads: with 3 rounds, stampede's measured rounds still ran unoptimized code (--allow-natives-
     * syntax, %GetOptimizationStatus), some 500 ns a read against 110 once optimized.
     */
    warmupRounds: int('BENCH_SWR_WARMUP_ROUNDS', 10),
    /**
     * Fresh hits each library serves on another key before the rounds, in bursts of `callers`: a
     * server has served many hits of its read path by the time a key expires, so its stale reads run
     * compiled code, where the warm-up rounds alone leave part of each library's path interpreted.
     */
    freshHits: int('BENCH_SWR_FRESH_HITS', 100_000),
    callers: int('BENCH_SWR_CALLERS', 1_000),
    ttlMs: 1_000,
    graceMs: int('BENCH_SWR_GRACE_MS', 5_000),
  },
  shutdown: { rounds: int('BENCH_SHUTDOWN_ROUNDS', 5), callers: int('BENCH_SHUTDOWN_CALLERS', 20) },
  tiered: { rounds: int('BENCH_TIERED_ROUNDS', 50), processes: int('BENCH_TIERED_PROCESSES', 4) },
  outage: {
    rounds: int('BENCH_OUTAGE_ROUNDS', 3),
    ttlMs: 1_000,
    outageMs: int('BENCH_OUTAGE_MS', 3_000),
    everyMs: 20,
    burst: 20,
    /** fail-safe throttle, bentocache graceBackoff */
    backoffMs: 500,
  },
  steady: {
    processes: int('BENCH_STEADY_PROCESSES', 4),
    ttlMs: int('BENCH_STEADY_TTL_MS', 2_000),
    fillMs: 100,
    periods: int('BENCH_STEADY_PERIODS', 6),
    /** one read every 2 ms: ~500 reads/s per process */
    intervalMs: 2,
    /** Only these variants (ids, comma-separated), for development. */
    variants: (process.env.BENCH_STEADY_VARIANTS ?? '').split(',').filter(Boolean),
  },
  tags: { rounds: int('BENCH_TAGS_ROUNDS', 5), entries: int('BENCH_TAGS_ENTRIES', 100_000) },
  commands: { rounds: int('BENCH_COMMANDS_ROUNDS', 3), misses: 50, hits: 200 },
  memory: { keys: int('BENCH_MEMORY_KEYS', 1_000_000), max: 10_000, batch: 1_000 },
};

export function enabled(name) {
  return config.only.length === 0 || config.only.includes(name);
}
