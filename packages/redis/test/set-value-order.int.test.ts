import { getOrComputeWith, getValue, setValue } from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { deletePrefix, written } from './helpers.js';

// Two replicas (each its own connection, so each its own estimate of Redis's clock) race a fill and
// a `setValue` of one key. Their estimates may differ by about a round trip plus a millisecond of
// Date.now()'s resolution, either way: a fill stamped by an estimate ahead of Redis could look newer
// than a `setValue` made a few ms after it started, and replace the value the caller had just set,
// for a whole ttl (seen 7 times in 40 with 0-2 ms between them). A fill is now stamped by an
// estimate never ahead of Redis, and a `setValue` replaces whatever is stored: two replicas'
// `setValue`s land in the order Redis runs them (before, one was refused in most runs).

const prefix = randomPrefix('set-value-order');
const clients: Redis[] = [];
let setter: RedisCache;
let filler: RedisCache;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  const { url } = await testRedis();
  clients.push(new Redis(url), new Redis(url));
  setter = createRedisCache({ client: clients[0] as Redis, prefix, name: 'set-value-order-a' });
  filler = createRedisCache({ client: clients[1] as Redis, prefix, name: 'set-value-order-b' });
  // Both estimates measured (reads 300 ms apart: a slow first measurement is made again).
  for (let i = 0; i < 2; i++) {
    await Promise.all([getValue(setter, 'warm-up'), getValue(filler, 'warm-up')]);
    await sleep(300);
  }
});
afterAll(async () => {
  await Promise.all([setter.close(), filler.close()]);
  await deletePrefix(clients[0] as Redis, prefix);
  for (const client of clients) client.disconnect();
});

describe("a setValue on one replica and another replica's fill that started before it", () => {
  it('the value set stays, however the two estimates of the server clock differ', async () => {
    const lost: number[] = [];
    for (let run = 0; run < 40; run++) {
      const key = `k${run}`;
      let started: () => void = () => {};
      const fillStarted = new Promise<void>((resolve) => {
        started = resolve;
      });
      const filling = getOrComputeWith(filler, key, { ttl: 60_000 }, async () => {
        started();
        await sleep(6);
        return 'older fill';
      });
      await fillStarted;
      // 6 to 8 ms after the fill started: more than the two estimates' uncertainty (each within
      // half a round trip plus a millisecond here) can turn around.
      await sleep(6 + (run % 3));
      await setValue(setter, key, 'set', { ttl: 60_000 });
      expect(await filling).toBe('older fill');
      await written(filler);
      if ((await getValue(setter, key)) !== 'set') lost.push(run);
    }
    expect(lost).toEqual([]);
  });

  it("two replicas' setValues land in the order Redis runs them (a value, or a removal with ttl 0)", async () => {
    const wrong: number[] = [];
    for (let run = 0; run < 40; run++) {
      const key = `both${run}`;
      const removal = run % 2 === 1;
      await setValue(setter, key, 'first', { ttl: 60_000 });
      await setValue(filler, key, 'second', { ttl: removal ? 0 : 60_000 });
      if ((await getValue(setter, key)) !== (removal ? undefined : 'second')) wrong.push(run);
    }
    expect(wrong).toEqual([]);
  });
});
