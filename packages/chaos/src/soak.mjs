// Bounded soak: SOAK_PROCESSES (default 4) child processes run a mixed workload (hits, misses,
// failing and timing-out fills, aborts, invalidations, short-TTL expiries) with @stampede/redis, the
// fill lock and SWR, for SOAK_SECONDS (default 60), on loopback only. Each child reports its figures
// and must then exit on its own within 5 s (a leaked timer or socket fails the soak). Prints a table
// and exits non-zero if any invariant failed.
//
// Redis: REDIS_URL if set (loopback only), else a redis-server from PATH on a free port, stopped at
// the end. Only this run's random key prefix is touched, and deleted at the end.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const PROCESSES = Number(process.env.SOAK_PROCESSES ?? 4);
const KEYS = Number(process.env.SOAK_KEYS ?? 300);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 8);
// Heap growth allowed between the post-warm-up and the final heapUsed (both after a full gc).
const HEAP_GROWTH_LIMIT = 8 * 1024 * 1024;
const EXIT_WATCHDOG_MS = 5_000;
const CHILD = fileURLToPath(new URL('./soak-child.mjs', import.meta.url));

for (const [name, value] of Object.entries({ SECONDS, PROCESSES, KEYS, CONCURRENCY })) {
  if (!Number.isFinite(value) || value <= 0) {
    console.error(`soak: ${name} must be a positive number; got ${value}`);
    process.exit(2);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    const host = new URL(fromEnv).hostname;
    if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) {
      throw new Error(`soak: REDIS_URL must point at loopback; got host ${host}`);
    }
    return { url: fromEnv, stop: async () => {} };
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'stampede-soak-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const failed = new Promise((_resolve, reject) => {
    child.once('error', (error) =>
      reject(new Error(`soak: cannot start redis-server (install it, or set REDIS_URL): ${error.message}`)),
    );
  });
  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  const deadline = Date.now() + 10_000;
  try {
    for (;;) {
      try {
        await Promise.race([probe.connect().then(() => probe.ping()), failed]);
        break;
      } catch (error) {
        if (String(error.message).startsWith('soak:')) throw error;
        if (child.exitCode !== null) throw new Error(`soak: redis-server exited with code ${child.exitCode}`);
        if (Date.now() > deadline)
          throw new Error(`soak: redis-server on port ${port} did not answer in 10 s`);
        probe.disconnect();
        await sleep(100);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  } finally {
    probe.disconnect();
  }
  return { url, stop };
}

async function deletePrefix(url, prefix) {
  const client = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length !== 0) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

/** Runs one child; resolves { report, exit, stderr, problems }. */
function runChild(index, url, prefix) {
  const config = { url, prefix, seconds: SECONDS, keys: KEYS, concurrency: CONCURRENCY, index };
  const child = spawn(process.execPath, ['--expose-gc', CHILD, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const problems = [];
  let report;
  let watchdog;
  const hardLimit = setTimeout(
    () => {
      problems.push(`did not report within ${SECONDS + 60} s`);
      child.kill('SIGKILL');
    },
    (SECONDS + 60) * 1_000,
  );
  createInterface({ input: child.stdout }).on('line', (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      problems.push(`wrote a non-JSON line: ${line.slice(0, 200)}`);
      return;
    }
    if (message.type !== 'report') return;
    report = message;
    watchdog = setTimeout(() => {
      problems.push(`still running ${EXIT_WATCHDOG_MS / 1_000} s after its report (leaked timer or socket)`);
      child.kill('SIGKILL');
    }, EXIT_WATCHDOG_MS);
  });
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      clearTimeout(hardLimit);
      clearTimeout(watchdog);
      resolve({ index, pid: child.pid, report, exit: signal ?? code, stderr, problems });
    });
  });
}

const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1);
const ms = (value) => (value < 10 ? value.toFixed(2) : value.toFixed(0));

function table(results) {
  const header = [
    'proc',
    'ops',
    'hits',
    'stale',
    'misses',
    'fills',
    'err:fill',
    'err:fill_failed',
    'err:timeout',
    'err:aborted',
    'err:other',
    'backend',
    'p50 ms',
    'p99 ms',
    'heap start MB',
    'heap end MB',
    'exit',
  ];
  const rows = results.map(({ index, report: r, exit }) => {
    if (r === undefined) return [String(index), ...header.slice(1, -1).map(() => '-'), String(exit)];
    const other = (r.errors.unexpected ?? 0) + (r.errors.backend ?? 0);
    const backend = Object.values(r.backendErrors).reduce((sum, count) => sum + count, 0);
    return [
      String(index),
      String(r.ops),
      String(r.hits),
      String(r.staleHits),
      String(r.misses),
      String(r.fills),
      String(r.errors.fill ?? 0),
      String(r.errors.fill_failed ?? 0),
      String(r.errors.timeout ?? 0),
      String(r.errors.aborted ?? 0),
      String(other),
      String(backend),
      ms(r.p50Ms),
      ms(r.p99Ms),
      mb(r.heapStart),
      mb(r.heapEnd),
      String(exit),
    ];
  });
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((cell, i) => cell.padStart(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

function invariants({ index, report: r, exit, problems }) {
  const failed = [...problems];
  if (r === undefined) failed.push('no report');
  else {
    if (r.unhandledRejections !== 0) failed.push(`${r.unhandledRejections} unhandled rejection(s)`);
    if (r.inFlight !== 0) failed.push(`in-flight registry not empty (${r.inFlight})`);
    if ((r.errors.unexpected ?? 0) !== 0) failed.push(`unexpected errors: ${r.unexpected.join(' | ')}`);
    if (r.heapEnd - r.heapStart > HEAP_GROWTH_LIMIT)
      failed.push(`heap grew ${mb(r.heapEnd - r.heapStart)} MB (limit ${mb(HEAP_GROWTH_LIMIT)} MB)`);
    if (r.ops === 0 || r.fills === 0 || r.hits === 0) failed.push('the workload did not run');
  }
  if (exit !== 0) failed.push(`exit ${exit}`);
  return failed.map((problem) => `process ${index}: ${problem}`);
}

const prefix = `stampede-soak-${process.pid}-${Math.random().toString(36).slice(2, 10)}:`;
console.log(
  `soak: ${PROCESSES} processes x ${CONCURRENCY} loops, ${KEYS} keys, ${SECONDS} s, prefix ${prefix}`,
);
const redis = await startRedis();
let failures = [];
try {
  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: PROCESSES }, (_, i) => runChild(i, redis.url, prefix)),
  );
  const wall = (Date.now() - started) / 1_000;
  console.log(table(results));
  const total = results.reduce((sum, { report }) => sum + (report?.ops ?? 0), 0);
  const backend = {};
  for (const { report } of results) {
    for (const [operation, count] of Object.entries(report?.backendErrors ?? {}))
      backend[operation] = (backend[operation] ?? 0) + count;
  }
  console.log(
    `total ${total} ops in ${wall.toFixed(1)} s (${Math.round(total / wall)} ops/s); backend errors by operation: ${JSON.stringify(backend)}`,
  );
  failures = results.flatMap(invariants);
  for (const { index, stderr } of results) {
    if (stderr.trim() !== '') console.log(`process ${index} stderr:\n${stderr.trim()}`);
  }
} finally {
  await deletePrefix(redis.url, prefix).catch((error) => failures.push(`cleanup: ${error.message}`));
  await redis.stop();
}
if (failures.length === 0) {
  console.log(
    'soak: OK: no unhandled rejection, registries empty, heap stable, every process exited on its own',
  );
} else {
  console.log(`soak: FAILED\n${failures.map((failure) => `  - ${failure}`).join('\n')}`);
  process.exitCode = 1;
}
