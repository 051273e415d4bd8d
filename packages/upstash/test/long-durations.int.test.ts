import { type BackendErrorEvent, getValue, onStampedeEvent, setValue } from '@stampede/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-long-durations');
});
afterAll(async () => {
  await h?.stop();
});

describe('durations beyond the 24.8-day timer limit (Upstash REST server)', () => {
  it("operationTimeout '30d' lets every request succeed", async () => {
    const events: BackendErrorEvent[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'backend-error') events.push(event);
    });
    try {
      const cache = createUpstashCache({
        client: h.client(),
        prefix: h.nextPrefix(),
        operationTimeout: '30d',
      });
      for (let round = 0; round < 10; round++) {
        await setValue(cache, `k${round}`, { round }, { ttl: '1m' });
        expect(await getValue(cache, `k${round}`)).toEqual({ round });
      }
      expect(events).toEqual([]);
    } finally {
      stop();
    }
  });
});
