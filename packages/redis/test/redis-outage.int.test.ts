import {
  freePort,
  type RedisProcess,
  randomPrefix,
  spawnRedisServer,
  type Worker,
} from '@stampede/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HerdReport, herd, startReplicas, stopWorkers, totals } from './helpers.js';

// A redis-server of this test's own, so it can be stopped mid-herd and started again on its port.
const REPLICAS = 3;
const CALLERS = 100;
const prefix = randomPrefix('redis-outage');
let port: number;
let server: RedisProcess | undefined;
let workers: Worker[] = [];

beforeAll(async () => {
  port = await freePort();
  server = await spawnRedisServer(port);
  workers = await startReplicas(REPLICAS, { url: server.url, prefix, operationTimeout: 300 });
});

afterAll(async () => {
  await stopWorkers(workers);
  await server?.stop();
});

describe('Redis stopped mid-herd', () => {
  it('answers every call from local fills, and protection resumes once Redis is back on its port', async () => {
    const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000 };
    const ids = workers.map(() => `down-${Math.random().toString(36).slice(2)}`);
    workers.forEach((worker, i) => {
      worker.send({ cmd: 'herd', id: ids[i], key: 'outage', callers: CALLERS, fillMs: 800, options });
    });
    // The lock holder has started its fill: stop Redis under everyone.
    await Promise.any(
      workers.map((worker) => worker.next((report: { event?: string }) => report.event === 'fill-start')),
    );
    const stoppedAt = Date.now();
    await server?.stop();
    server = undefined;
    const reports = await Promise.all(
      workers.map((worker, i) =>
        worker.next<HerdReport>((report) => report.id === ids[i] && 'answered' in report),
      ),
    );
    const during = totals(reports);
    const faults = reports.flatMap((report) => report.backendErrors);
    console.log(
      `[outage] Redis stopped mid-herd: ${during.answered} answered, ${during.fills} fill(s) (local), slowest ${during.maxMs} ms, done ${Date.now() - stoppedAt} ms after the stop; backend errors: ${faults.join(', ')}`,
    );
    expect(during.errors).toEqual([]);
    expect(faults.length).toBeGreaterThan(0);
    expect(during.answered).toBe(REPLICAS * CALLERS);
    expect(during.fills).toBeGreaterThanOrEqual(1);
    expect(during.fills).toBeLessThanOrEqual(REPLICAS);

    server = await spawnRedisServer(port);
    const readyAt = Date.now();
    await Promise.all(
      workers.map(async (worker) => {
        const id = `ready-${worker.pid}`;
        worker.send({ cmd: 'ready', id });
        const report = await worker.next<{ id: string; ready: boolean }>((r) => r.id === id, 30_000);
        expect(report.ready).toBe(true);
      }),
    );
    const after = totals(
      await herd(workers, { key: 'after-outage', callers: CALLERS, fillMs: 300, options }),
    );
    console.log(
      `[outage] Redis back on port ${port} (clients ready ${Date.now() - readyAt} ms later): ${after.fills} fill(s), ${after.answered} answered`,
    );
    expect(after.errors).toEqual([]);
    expect(after.answered).toBe(REPLICAS * CALLERS);
    expect(after.fills).toBe(1);
  });
});
