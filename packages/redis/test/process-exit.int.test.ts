import { fileURLToPath } from 'node:url';
import { randomPrefix, runToExit, startRedisCluster, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/quit-after-wait.mjs', import.meta.url));
const QUIT_AT_ONCE = fileURLToPath(new URL('./fixtures/quit-at-once.mjs', import.meta.url));
const prefix = randomPrefix('process-exit');
let url: string;

beforeAll(async () => {
  url = (await testRedis()).url;
});
afterAll(async () => {
  const client = new Redis(url);
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

interface Report {
  waited: string;
  holderFills: number;
  waiterFills: number;
  lockContended: number;
  lockWaitHits: number;
  quitAt: number;
}

/** Runs the fixture; resolves its report and how long it lived after quitting, or null if it hung. */
async function run(
  config: object,
  limitMs: number,
): Promise<{ report: Report; exitedAfterMs: number | null }> {
  const { code, stdout, exitedAt } = await runToExit(FIXTURE, [JSON.stringify(config)], { limitMs });
  if (code !== 0 && code !== 'still running') {
    throw new Error(`the fixture exited with ${code} (its stderr is above)`);
  }
  let report: Report;
  try {
    report = JSON.parse(stdout.trim()) as Report;
  } catch {
    throw new Error(`the fixture wrote no report; stdout: ${stdout}`);
  }
  return { report, exitedAfterMs: exitedAt === undefined ? null : exitedAt - report.quitAt };
}

const ended = (client: Redis) =>
  new Promise<void>((resolve) => (client.status === 'end' ? resolve() : client.once('end', () => resolve())));

describe('the process exits when the user closes their clients', () => {
  it("the subscriber ends with the user's client, and none is opened for an ended client", async () => {
    const client = new Redis(url);
    await client.ping();
    const duplicate = vi.spyOn(client, 'duplicate');
    const cache = createRedisCache({ client, prefix: `${prefix}in-process:` });
    // biome-ignore lint/style/noNonNullAssertion: the Redis cache has push wake-up
    const stop = cache.onFillDone!('k', () => {});
    const subscriber = duplicate.mock.results[0]?.value as Redis;
    await subscriber.ping();
    await client.quit();
    await ended(client);
    await vi.waitFor(() => expect(subscriber.status).toBe('end'), { timeout: 2_000 });
    stop();
    // biome-ignore lint/style/noNonNullAssertion: as above
    cache.onFillDone!('other', () => {})();
    expect(duplicate).toHaveBeenCalledTimes(1);
    await cache.close();
  });

  it('twelve caches on one client follow its end through one listener: no MaxListenersExceededWarning', async () => {
    const client = new Redis(url);
    await client.ping();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const duplicate = vi.spyOn(client, 'duplicate');
      const caches = Array.from({ length: 12 }, (_, i) =>
        createRedisCache({ client, prefix: `${prefix}tenant-${i}:` }),
      );
      // Each cache opened its own subscriber when it was made (the warm-up).
      expect(duplicate).toHaveBeenCalledTimes(12);
      const subscribers = duplicate.mock.results.map((result) => result.value as Redis);
      await Promise.all(subscribers.map((subscriber) => subscriber.ping()));
      expect(client.listenerCount('end')).toBe(1);
      // A closed cache leaves the others following the client; the last one out takes the listener.
      await caches[0]?.close();
      expect(client.listenerCount('end')).toBe(1);
      await client.quit();
      await ended(client);
      await vi.waitFor(() => expect(subscribers.every((s) => s.status === 'end')).toBe(true), {
        timeout: 2_000,
      });
      expect(client.listenerCount('end')).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      await Promise.all(caches.map((cache) => cache.close()));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('after a lock wait, quitting the ioredis clients (no cache.close()) lets the process exit', async () => {
    const { report, exitedAfterMs } = await run({ url, prefix: `${prefix}standalone:` }, 10_000);
    // The wait really happened and was woken by the push subscriber.
    expect(report).toMatchObject({ waited: 'from the holder', holderFills: 1, waiterFills: 0 });
    expect(report.lockContended).toBeGreaterThanOrEqual(1);
    expect(report.lockWaitHits).toBe(1);
    expect(exitedAfterMs).not.toBeNull();
    expect(exitedAfterMs).toBeLessThan(2_000);
  });

  it.each([
    ['a standalone client', false],
    ['a Cluster (it never emits end when quit before it connected)', true],
  ])(
    '%s quit at once after the cache is made (no cache.close()) lets the process exit',
    async (_, onCluster) => {
      const cluster = onCluster ? await startRedisCluster(3) : undefined;
      try {
        const config = { url, clusterNodes: cluster?.nodes, prefix: `${prefix}at-once:` };
        const run = await runToExit(QUIT_AT_ONCE, [JSON.stringify(config)], {
          limitMs: 10_000,
          mark: 'quit',
        });
        expect(run.stdout.trim()).toBe('quit');
        expect(run.code).toBe(0);
        // Within the second a Cluster may stay 'disconnecting' before it counts as ended, plus a start.
        expect(run.exitedAfterMarkMs).toBeLessThan(3_000);
      } finally {
        await cluster?.stop();
      }
    },
  );

  it('the same with a Redis Cluster client: its end is followed too', async () => {
    const cluster = await startRedisCluster(3);
    try {
      const { report, exitedAfterMs } = await run(
        { clusterNodes: cluster.nodes, prefix: `${prefix}cluster:` },
        15_000,
      );
      expect(report).toMatchObject({ waited: 'from the holder', holderFills: 1, waiterFills: 0 });
      expect(report.lockWaitHits).toBe(1);
      expect(exitedAfterMs).not.toBeNull();
      expect(exitedAfterMs).toBeLessThan(2_000);
    } finally {
      await cluster.stop();
    }
  });
});
