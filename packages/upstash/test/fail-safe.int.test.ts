import { getOrComputeWith } from '@stampede/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

// Two Upstash caches (two replicas, each with its own REST client) on one prefix: the re-armed value
// fail-safe writes goes through cache.set, so the other replica hits it instead of trying the
// failing database.

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-fail-safe');
});
afterAll(async () => {
  await h?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TTL = 150;
const options = {
  ttl: TTL,
  failSafe: { maxStale: '1m', throttle: '5s' },
  distributedFillLock: true,
} as const;

describe('fail-safe on Upstash', () => {
  it('a failing fill answers with the last value, re-armed for the other replica', async () => {
    const prefix = h.nextPrefix();
    const a = createUpstashCache({ client: h.client(), prefix, name: 'upstash-fail-safe-a' });
    const b = createUpstashCache({ client: h.client(), prefix, name: 'upstash-fail-safe-b' });
    expect(await getOrComputeWith(a, 'count', options, () => 41)).toBe(41);
    await sleep(TTL + 50);
    const failing = vi.fn(async (): Promise<number> => {
      throw new Error('database down');
    });
    expect(await getOrComputeWith(a, 'count', options, failing)).toBe(41);
    expect(failing).toHaveBeenCalledTimes(1);
    // Upstash writes may be handed to waitUntil; without one they land before the lock is released,
    // and the read below comes after that.
    await vi.waitFor(async () =>
      expect((await b.get('count'))?.freshUntil).toBeGreaterThan(Date.now() + 1_000),
    );
    expect(await getOrComputeWith(b, 'count', options, failing)).toBe(41);
    expect(failing).toHaveBeenCalledTimes(1);
  });
});
