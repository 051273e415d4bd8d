import { fileURLToPath } from 'node:url';
import { spawnWorker, testRedis, type Worker } from '@stampede/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upstashKeys } from '../src/index.js';
import { builtEntry } from './built-package.js';
import { type Harness, startHarness } from './harness.js';

// Replica processes whose clocks are 5 minutes fast and 5 minutes slow, on Upstash (through the
// local REST server) and, sharing the same keys, on @stampede/redis. Which of a fill and a delete
// came first is decided on Redis's clock, so the skew changes nothing: a fill that started before a
// delete never writes back, one that started after it is written, and a value written by one
// replica is fresh for its whole ttl on the other.

const SKEW_MS = 5 * 60_000;
const REPLICA = fileURLToPath(new URL('./fixtures/skewed-replica.mjs', import.meta.url));
let h: Harness;
let prefix: string;
const workers: Worker[] = [];
let sequence = 0;

interface Report {
  id: string;
  done?: boolean;
  value?: unknown;
  now?: number;
  error?: string;
}

async function start(adapter: 'upstash' | 'redis', skew: number): Promise<Worker> {
  const config = {
    adapter,
    redisUrl: (await testRedis()).url,
    upstashUrl: h.server.url,
    upstashToken: h.server.token,
    prefix,
  };
  const worker = spawnWorker(REPLICA, [JSON.stringify(config)], { SKEW_MS: String(skew) });
  workers.push(worker);
  await worker.next<Report>((report) => report.id === 'start');
  return worker;
}

async function ask(worker: Worker, command: Record<string, unknown>, until = 'done'): Promise<Report> {
  const id = String(command.id ?? `c${++sequence}`);
  if (command.id === undefined) worker.send({ ...command, id });
  const report = await worker.next<Report>(
    (candidate) => candidate.id === id && (candidate.error !== undefined || until in candidate),
  );
  if (report.error !== undefined) throw new Error(`replica ${worker.pid}: ${report.error}`);
  return report;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
// Each replica knows Redis's clock to within about one round trip of its measurement (a loaded test
// machine can make that tens of ms). The scenario's fill and delete are this far apart, well beyond
// that, so the test checks the ordering rule and not the measurement's precision.
const ORDER_GAP_MS = 300;

beforeAll(async () => {
  builtEntry();
  h = await startHarness('upstash-skew');
  prefix = h.nextPrefix();
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill('SIGKILL')));
  await h?.stop();
});

describe.each([
  ['Upstash', 'Upstash', 'upstash', 'upstash'],
  ['Upstash', '@stampede/redis', 'upstash', 'redis'],
] as const)(
  'a fast (+5 min) %s replica and a slow (-5 min) %s replica',
  (_a, _b, fastAdapter, slowAdapter) => {
    let fast: Worker;
    let slow: Worker;
    beforeAll(async () => {
      [fast, slow] = await Promise.all([start(fastAdapter, SKEW_MS), start(slowAdapter, -SKEW_MS)]);
      const [a, b] = await Promise.all([ask(fast, { cmd: 'now' }), ask(slow, { cmd: 'now' })]);
      expect((a.now ?? 0) - (b.now ?? 0)).toBeGreaterThan(2 * SKEW_MS - 5_000);
      // Two reads 300 ms apart: the second re-measures Redis's clock if the first measurement (made
      // while the replicas started) had a slow round trip.
      for (const worker of [fast, slow]) await ask(worker, { cmd: 'get', key: 'warm-up' });
      await sleep(300);
      for (const worker of [fast, slow]) await ask(worker, { cmd: 'get', key: 'warm-up' });
    });

    it.each([
      ['the slow one deletes, the fast one fills', () => [slow, fast] as const],
      ['the fast one deletes, the slow one fills', () => [fast, slow] as const],
    ])(
      '%s: a fill that started before the delete never writes back; one that started after it is written',
      async (label, roles) => {
        const [deleter, filler] = roles();
        const key = `${fastAdapter}-${slowAdapter} ${label}`;
        const raw = h.client({ automaticDeserialization: false });
        const fillId = `fill-${++sequence}`;
        filler.send({ cmd: 'fill', id: fillId, key, value: 'started before the delete', gated: true });
        await ask(filler, { id: fillId }, 'started');
        await sleep(ORDER_GAP_MS);
        await ask(deleter, { cmd: 'invalidate', key });
        await ask(filler, { cmd: 'open', fillId });
        expect((await ask(filler, { id: fillId })).value).toBe('started before the delete');
        expect(await raw.get(upstashKeys(prefix, key).value)).toMatch(/^t\|\d+$/);
        expect((await ask(deleter, { cmd: 'get', key })).value).toBeNull();
        expect((await ask(filler, { cmd: 'get', key })).value).toBeNull();
        await sleep(ORDER_GAP_MS);
        expect((await ask(filler, { cmd: 'fill', key, value: 'started after the delete' })).value).toBe(
          'started after the delete',
        );
        expect(await raw.get(upstashKeys(prefix, key).value)).toMatch(/^s2\|/);
        expect((await ask(deleter, { cmd: 'get', key })).value).toBe('started after the delete');
        expect((await ask(filler, { cmd: 'get', key })).value).toBe('started after the delete');
      },
    );
  },
);
