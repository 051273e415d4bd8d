import {
  type BackendErrorEvent,
  getOrComputeWith,
  getValue,
  onStampedeEvent,
  setValue,
} from '@stampede/core';
import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache } from '../src/index.js';
import { deletePrefix } from './helpers.js';

const prefix = randomPrefix('long-durations');
let client: Redis;
let events: BackendErrorEvent[] = [];
let stopListening: () => void;

beforeAll(async () => {
  client = new Redis((await testRedis()).url);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterAll(async () => {
  stopListening();
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

describe('durations beyond the 24.8-day timer limit (real Redis)', () => {
  it("operationTimeout '30d' lets every call succeed", async () => {
    const cache = createRedisCache({ client, prefix, operationTimeout: '30d' });
    events = [];
    for (let round = 0; round < 20; round++) {
      await setValue(cache, `k${round}`, { round }, { ttl: '1m' });
      expect(await getValue(cache, `k${round}`)).toEqual({ round });
    }
    const filled = await getOrComputeWith(
      cache,
      'locked',
      { ttl: '1m', distributedFillLock: true, lockTtl: '80d', fillTimeout: '30d' },
      () => 'filled',
    );
    expect(filled).toBe('filled');
    expect(await getValue(cache, 'locked')).toBe('filled');
    expect(events).toEqual([]);
    await cache.close();
  });
});
