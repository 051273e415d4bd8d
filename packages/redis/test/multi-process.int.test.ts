import { randomPrefix, testRedis, type Worker, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKeys } from '../src/index.js';
import { deletePrefix, herd, startReplicas, stopWorkers, totals } from './helpers.js';

// Four replica processes (each its own core, its own ioredis connection), 250 concurrent callers each.
const REPLICAS = 4;
const CALLERS = 250;
const prefix = randomPrefix('redis-fleet');
let workers: Worker[] = [];
let url: string;

beforeAll(async () => {
  url = (await testRedis()).url;
  workers = await startReplicas(REPLICAS, { url, prefix });
});

afterAll(async () => {
  await stopWorkers(workers);
  const client = new Redis(url);
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe(`${REPLICAS} replica processes x ${CALLERS} callers on one expired key`, () => {
  it('fill once in total with distributedFillLock', async () => {
    const reports = await herd(workers, {
      key: 'locked-herd',
      callers: CALLERS,
      fillMs: 300,
      options: { ttl: 60_000, distributedFillLock: true },
    });
    const sum = totals(reports);
    console.log(
      `[fleet] with the lock: ${sum.fills} fill(s), ${sum.answered} answered, slowest ${sum.maxMs} ms`,
    );
    expect(sum.errors).toEqual([]);
    expect(sum.answered).toBe(REPLICAS * CALLERS);
    expect(sum.fills).toBe(1);
    expect(sum.fillers).toHaveLength(1);
  });

  it('fill at most once per replica without it', async () => {
    const reports = await herd(workers, {
      key: 'unlocked-herd',
      callers: CALLERS,
      fillMs: 300,
      options: { ttl: 60_000 },
    });
    const sum = totals(reports);
    console.log(`[fleet] without the lock: ${sum.fills} fill(s), ${sum.answered} answered`);
    expect(sum.errors).toEqual([]);
    expect(sum.answered).toBe(REPLICAS * CALLERS);
    expect(sum.fills).toBeGreaterThanOrEqual(1);
    expect(sum.fills).toBeLessThanOrEqual(REPLICAS);
  });

  it('push wake-up: the slowest caller finishes soon after the fill, where polling waits a full interval', async () => {
    const fillMs = 200;
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 1_000 };
    const pushed = totals(
      await herd(workers, { key: 'pushed', callers: CALLERS, fillMs, mode: 'push', options }),
    );
    const polled = totals(
      await herd(workers, { key: 'polled', callers: CALLERS, fillMs, mode: 'poll', options }),
    );
    console.log(
      `[fleet] fill ${fillMs} ms, lockPollInterval 1 s: slowest caller ${pushed.maxMs} ms with push, ${polled.maxMs} ms polling only`,
    );
    for (const sum of [pushed, polled]) {
      expect(sum.errors).toEqual([]);
      expect(sum.answered).toBe(REPLICAS * CALLERS);
      expect(sum.fills).toBe(1);
    }
    // Generous: the machine is shared. A loser's first poll comes 1 s after it lost the lock.
    expect(pushed.maxMs).toBeLessThan(fillMs + 800);
    expect(polled.maxMs).toBeGreaterThanOrEqual(900);
  });

  it("another replica fills once the SIGKILLed holder's lock lapses; every survivor's caller answers", async () => {
    const [holder, ...survivors] = await startReplicas(3, { url, prefix });
    workers.push(holder as Worker, ...survivors);
    const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 1_500, lockWaitTimeout: 15_000 };
    holder?.send({ cmd: 'herd', id: 'doomed', key: 'crash', callers: 10, fillMs: 60_000, options });
    await holder?.next((report: { event?: string }) => report.event === 'fill-start');
    const pending = herd(survivors, { key: 'crash', callers: CALLERS, fillMs: 100, options });
    // Every survivor lost the lock and waits for it: each has subscribed to the key's channel.
    const observer = new Redis(url);
    try {
      const { channel } = redisKeys(prefix, 'crash');
      await waitFor(
        async () => ((await observer.pubsub('NUMSUB', channel)) as [string, number])[1] >= survivors.length,
        { timeout: 10_000, message: 'every survivor to wait for the lock' },
      );
    } finally {
      observer.disconnect();
    }
    const killedAt = Date.now();
    await holder?.kill('SIGKILL');
    const sum = totals(await pending);
    console.log(
      `[fleet] holder SIGKILLed: survivors filled ${sum.fills} time(s), answered ${sum.answered} in ${Date.now() - killedAt} ms after the kill (lockTtl 1.5 s)`,
    );
    expect(sum.errors).toEqual([]);
    expect(sum.answered).toBe(survivors.length * CALLERS);
    expect(sum.fills).toBe(1);
  });
});
