// Small statistics and formatting helpers shared by every scenario.

/** The median of `xs` (the upper one for an even count). */
export function median(xs) {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** The `p`-th percentile (0..100) of `xs`, nearest rank. */
export function percentile(xs, p) {
  if (xs.length === 0) return Number.NaN;
  const s = Float64Array.from(xs).sort();
  const rank = Math.ceil((p / 100) * s.length) - 1;
  return s[Math.min(s.length - 1, Math.max(0, rank))];
}

/** Milliseconds as text: `0.012 ms`, `3.4 ms`, `1.52 s`. */
export function ms(value) {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 1_000) return `${(value / 1_000).toFixed(2)} s`;
  if (value >= 10) return `${value.toFixed(1)} ms`;
  if (value >= 1) return `${value.toFixed(2)} ms`;
  return `${value.toFixed(3)} ms`;
}

/** Nanoseconds as text. */
export function ns(value) {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= 1_000 ? `${(value / 1_000).toFixed(2)} us` : `${value.toFixed(0)} ns`;
}

/** A ratio as `1.23x`. */
export function ratio(value) {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= 100 ? `${value.toFixed(0)}x` : `${value.toFixed(2)}x`;
}

/** A markdown table from a header row and data rows (cells are strings or numbers). */
export function table(header, rows, align = []) {
  const line = (cells) => `| ${cells.map((c) => String(c)).join(' | ')} |`;
  const rule = `|${header.map((_, i) => (align[i] === 'r' ? '---:' : '---')).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** Progress output goes to stderr so stdout stays the markdown report. */
export function progress(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

/** `items` rotated by `round`, so no contender always runs first (or last) in a round. */
export function rotate(items, round) {
  const k = round % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

export const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));

/**
 * Starts `callers` concurrent calls of `call` (each in its own microtask) and records, per caller,
 * its latency in ms (0 until it settles) and whether it failed.
 * @param {number} callers
 * @param {() => unknown} call
 */
export function startCallers(callers, call) {
  const latencies = new Array(callers).fill(0);
  const counts = { answered: 0, failed: 0 };
  const pending = new Array(callers);
  for (let i = 0; i < callers; i++) {
    const start = performance.now();
    pending[i] = Promise.resolve()
      .then(call)
      .catch(() => {
        counts.failed++;
      })
      .finally(() => {
        counts.answered++;
        latencies[i] = performance.now() - start;
      });
  }
  return { all: Promise.all(pending), latencies, counts };
}

/** How the processes of `cases` (each with the `worker` startChild gave it) were placed. */
export function pinning(cases) {
  const cpus = new Set(cases.map((c) => c.worker?.cpu));
  const [cpu] = cpus;
  return cpus.size === 1 && cpu !== undefined
    ? `every process pinned to CPU ${cpu}`
    : 'processes not pinned (taskset unavailable)';
}
