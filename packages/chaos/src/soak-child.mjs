// One soak process: a mixed workload on a few hundred keys with @stampede/redis, the fill lock and
// SWR, for a bounded time. It reports one JSON line on stdout, closes its clients and must then exit
// on its own (the parent's watchdog fails the soak otherwise). Run with --expose-gc.
// Config: argv[2] = JSON { url, prefix, seconds, keys, concurrency, index }.
import {
  getOrComputeWith,
  inFlightCount,
  invalidate,
  isCacheFillError,
  onStampedeEvent,
  setValue,
  statsByCache,
} from '@stampede/core';
import { createRedisCache } from '@stampede/redis';
import { Redis } from 'ioredis';

const config = JSON.parse(process.argv[2] ?? '{}');
const seconds = Number(config.seconds);
const keys = Number(config.keys);
const concurrency = Number(config.concurrency);

let unhandledRejections = 0;
process.on('unhandledRejection', () => {
  unhandledRejections++;
});

const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const pick = (n) => Math.floor(Math.random() * n);

if (typeof globalThis.gc !== 'function') {
  console.error('soak-child: run with --expose-gc');
  process.exitCode = 2;
} else {
  await main();
}

async function main() {
  const client = new Redis(config.url);
  let clientErrors = 0;
  client.on('error', () => {
    clientErrors++;
  });
  const cache = createRedisCache({ client, prefix: config.prefix, name: 'soak', operationTimeout: 500 });
  const backendErrors = {};
  const off = onStampedeEvent((event) => {
    if (event.type === 'backend-error')
      backendErrors[event.operation] = (backendErrors[event.operation] ?? 0) + 1;
  });

  // Latency histogram: buckets 10% wide from 10 µs, so memory stays flat however many ops run.
  const buckets = new Map();
  const record = (ms) => {
    const bucket = Math.max(0, Math.floor(Math.log(Math.max(ms, 0.01) / 0.01) / Math.log(1.1)));
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
  };
  const percentile = (p) => {
    const total = [...buckets.values()].reduce((sum, count) => sum + count, 0);
    let seen = 0;
    for (const bucket of [...buckets.keys()].sort((a, b) => a - b)) {
      seen += buckets.get(bucket);
      if (seen >= total * p) return 0.01 * 1.1 ** (bucket + 1);
    }
    return 0;
  };

  const counts = { ops: 0, reads: 0, aborts: 0, invalidations: 0, writes: 0 };
  const errors = {};
  const countError = (kind) => {
    errors[kind] = (errors[kind] ?? 0) + 1;
  };
  const unexpected = [];

  const fill = async ({ signal }) => {
    const roll = Math.random();
    if (roll < 0.08) throw new Error('soak: the database said no');
    if (roll < 0.1) {
      // Never settles on its own: fillTimeout aborts the signal, and a well-behaved fill stops then.
      await new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    await sleep(pick(15));
    return { at: Date.now(), payload: 'x'.repeat(pick(200)) };
  };

  const options = () => ({
    ttl: 100 + pick(900),
    staleWhileRevalidate: 500,
    distributedFillLock: true,
    lockTtl: 2_000,
    lockWaitTimeout: 400,
    lockPollInterval: 20,
    fillTimeout: 250,
  });

  const one = async () => {
    const key = `k${pick(keys)}`;
    const roll = Math.random();
    const started = performance.now();
    try {
      if (roll < 0.05) {
        counts.invalidations++;
        await invalidate(cache, key);
      } else if (roll < 0.07) {
        counts.writes++;
        await setValue(
          cache,
          key,
          { at: Date.now(), payload: 'set' },
          { ttl: 500, staleWhileRevalidate: 500 },
        );
      } else if (roll < 0.15) {
        counts.aborts++;
        const controller = new AbortController();
        const timer = setTimeout(() => {
          const reason = new Error('soak: caller left');
          reason.name = 'SoakAbort';
          controller.abort(reason);
        }, pick(25));
        try {
          await getOrComputeWith(cache, key, { ...options(), signal: controller.signal }, fill);
        } finally {
          clearTimeout(timer);
        }
      } else {
        counts.reads++;
        await getOrComputeWith(cache, key, options(), fill);
      }
    } catch (error) {
      if (isCacheFillError(error)) countError(error.kind);
      else if (error?.name === 'SoakAbort') countError('aborted');
      else if (roll < 0.07) countError('backend');
      else {
        countError('unexpected');
        if (unexpected.length < 5) unexpected.push(String(error?.stack ?? error));
      }
    } finally {
      counts.ops++;
      record(performance.now() - started);
    }
  };

  const deadline = Date.now() + seconds * 1_000;
  const warmUp = Math.min(5_000, Math.max(1_000, seconds * 100));
  let heapStart;
  const warmed = sleep(warmUp).then(() => {
    globalThis.gc();
    heapStart = process.memoryUsage().heapUsed;
  });
  const loops = Array.from({ length: concurrency }, async () => {
    while (Date.now() < deadline) {
      await one();
      // Keep the load modest: the machine is shared.
      await sleep(5 + pick(10));
    }
  });
  await Promise.all([...loops, warmed]);

  // Background refreshes and writes still running finish (or time out) within fillTimeout + a few calls.
  const settleBy = Date.now() + 5_000;
  while (inFlightCount(cache) !== 0 && Date.now() < settleBy) await sleep(20);
  await sleep(300);
  globalThis.gc();
  globalThis.gc();
  const heapEnd = process.memoryUsage().heapUsed;
  const stats = statsByCache().soak ?? {};

  say({
    type: 'report',
    index: config.index,
    pid: process.pid,
    seconds,
    ...counts,
    hits: stats.hits,
    staleHits: stats.staleHits,
    misses: stats.misses,
    fills: stats.fills,
    fillFailures: stats.fillFailures,
    fillTimeouts: stats.fillTimeouts,
    lockAcquired: stats.lockAcquired,
    lockWaitHits: stats.lockWaitHits,
    lockWaitTimeouts: stats.lockWaitTimeouts,
    errors,
    backendErrors,
    clientErrors,
    unexpected,
    unhandledRejections,
    inFlight: inFlightCount(cache),
    p50Ms: percentile(0.5),
    p99Ms: percentile(0.99),
    heapStart,
    heapEnd,
  });

  // Close what this process opened; it must now exit by itself (no process.exit).
  off();
  await cache.close();
  await client.quit().catch(() => client.disconnect());
}
