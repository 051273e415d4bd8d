import { fileURLToPath } from 'node:url';
import {
  broadcast,
  deletePrefix,
  randomPrefix,
  spawnWorker,
  testRedis,
  type Worker,
} from '@stampede/test-support';
import { startUpstashRestServer, type UpstashRestServer } from '@stampede/upstash-rest-server';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Separate processes on three different clients (ioredis, node-redis, @upstash/redis over HTTP)
// protect one another: they share one key layout, one lock and its announcements.

interface HerdReport {
  id: string;
  kind: string;
  fills: number;
  answered: number;
  errors: string[];
  values: string[];
}

const MEMBER = fileURLToPath(new URL('./fixtures/fleet-member.mjs', import.meta.url));
const prefix = randomPrefix('node-redis-fleet');
let url: string;
let server: UpstashRestServer;
const workers: Worker[] = [];

beforeAll(async () => {
  url = (await testRedis()).url;
  server = await startUpstashRestServer({ redisUrl: url });
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill('SIGKILL')));
  const cleaner = new Redis(url);
  await deletePrefix(cleaner, prefix);
  cleaner.disconnect();
  await server?.close();
});

describe('a mixed-client fleet', () => {
  it('3 processes (ioredis, node-redis, upstash) x 50 callers on one cold key: 1 fill in total', async () => {
    const upstash = { url: server.url, token: server.token };
    for (const kind of ['ioredis', 'node-redis', 'upstash']) {
      workers.push(spawnWorker(MEMBER, [JSON.stringify({ kind, url, upstash, prefix })]));
    }
    await Promise.all(
      workers.map((worker) => worker.next<{ id?: string }>((report) => report.id === 'start')),
    );

    const reports = await broadcast<HerdReport>(
      workers,
      { cmd: 'herd', key: 'cold', callers: 50, fillMs: 200 },
      (report) => 'answered' in report,
    );

    expect(reports.map((report) => report.kind).sort()).toEqual(['ioredis', 'node-redis', 'upstash']);
    expect(reports.flatMap((report) => report.errors)).toEqual([]);
    expect(reports.reduce((sum, report) => sum + report.answered, 0)).toBe(150);
    expect(reports.reduce((sum, report) => sum + report.fills, 0)).toBe(1);
    // Every caller in every process got the one filler's value.
    expect(new Set(reports.flatMap((report) => report.values)).size).toBe(1);
  });
});
