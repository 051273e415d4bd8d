import { fileURLToPath } from 'node:url';
import { randomPrefix, spawnWorker, testRedis, type Worker } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// Two replica processes whose clocks are 5 minutes fast and 5 minutes slow. Which of a fill and a
// delete came first is decided on Redis's clock, so the skew changes nothing: a fill that started
// before a delete never writes back, one that started after it is written, and a value written by
// one replica is fresh for its whole ttl on the other.

const SKEW_MS = 5 * 60_000;
const REPLICA = fileURLToPath(new URL('./fixtures/skewed-replica.mjs', import.meta.url));
const prefix = randomPrefix('clock-skew');
let url: string;
let ahead: Worker;
let behind: Worker;
let sequence = 0;

interface Report {
  id: string;
  done?: boolean;
  started?: boolean;
  value?: unknown;
  now?: number;
  error?: string;
}

function start(skew: number): Promise<Worker> {
  const worker = spawnWorker(REPLICA, [JSON.stringify({ url, prefix })], { SKEW_MS: String(skew) });
  return worker.next<Report>((report) => report.id === 'start').then(() => worker);
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
  url = (await testRedis()).url;
  [ahead, behind] = await Promise.all([start(SKEW_MS), start(-SKEW_MS)]);
  // Two reads 300 ms apart: the second re-measures Redis's clock if the first measurement (made while
  // the replicas started) had a slow round trip.
  for (const worker of [ahead, behind]) await ask(worker, { cmd: 'get', key: 'warm-up' });
  await sleep(300);
  for (const worker of [ahead, behind]) await ask(worker, { cmd: 'get', key: 'warm-up' });
});
afterAll(async () => {
  await Promise.all([ahead, behind].map((worker) => worker?.kill('SIGKILL')));
  const client = new Redis(url);
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe('replicas whose clocks are 5 minutes fast and 5 minutes slow', () => {
  it('really disagree by 10 minutes', async () => {
    const [fast, slow] = await Promise.all([ask(ahead, { cmd: 'now' }), ask(behind, { cmd: 'now' })]);
    expect((fast.now ?? 0) - (slow.now ?? 0)).toBeGreaterThan(2 * SKEW_MS - 5_000);
  });

  it.each([
    ['the slow replica deletes, the fast one fills', () => [behind, ahead] as const],
    ['the fast replica deletes, the slow one fills', () => [ahead, behind] as const],
  ])(
    '%s: a fill that started before the delete never writes back; one that started after it is written',
    async (label, roles) => {
      const [deleter, filler] = roles();
      const key = `skewed ${label}`;
      const client = new Redis(url);
      try {
        // A fill starts on one replica and is held...
        const fillId = `fill-${++sequence}`;
        filler.send({ cmd: 'fill', id: fillId, key, value: 'started before the delete', gated: true });
        await ask(filler, { id: fillId }, 'started');
        // ...the other deletes the key (well after, by far more than a round trip)...
        await sleep(ORDER_GAP_MS);
        await ask(deleter, { cmd: 'invalidate', key });
        // ...then the fill ends: its callers get the value, but it is not written.
        await ask(filler, { cmd: 'open', fillId });
        expect((await ask(filler, { id: fillId })).value).toBe('started before the delete');
        expect(await client.get(redisKeys(prefix, key).value)).toMatch(/^t\|\d+$/);
        expect((await ask(deleter, { cmd: 'get', key })).value).toBeNull();
        expect((await ask(filler, { cmd: 'get', key })).value).toBeNull();
        // A fill that starts after the delete is written, and is fresh on both replicas.
        await sleep(ORDER_GAP_MS);
        expect((await ask(filler, { cmd: 'fill', key, value: 'started after the delete' })).value).toBe(
          'started after the delete',
        );
        expect(await client.get(redisKeys(prefix, key).value)).toMatch(/^s2\|/);
        expect((await ask(deleter, { cmd: 'get', key })).value).toBe('started after the delete');
        expect((await ask(filler, { cmd: 'get', key })).value).toBe('started after the delete');
      } finally {
        client.disconnect();
      }
    },
  );
});
