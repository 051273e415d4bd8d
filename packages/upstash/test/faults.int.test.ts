import {
  getOrComputeWith,
  inFlightCount,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  stats,
} from '@stampede/core';
import { freePort, waitFor } from '@stampede/test-support';
import type { Fault } from '@stampede/upstash-rest-server';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createUpstashCache, isUpstashCacheError } from '../src/index.js';
import { type Harness, startHarness, upstashClient } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-faults');
});
afterAll(async () => {
  await h?.stop();
});
beforeEach(() => {
  resetStats();
});
afterEach(() => {
  h.server.setFault(null);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The herd's fill takes this long on purpose: part of the bounded answer time asserted below. */
const FILL_MS = 50;

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
}

describe.each<Fault>(['500', 'garbage', 'reset', 'hang'])("a REST server answering '%s'", (fault) => {
  it('still answers every caller from the fill, in bounded time, and counts the faults', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix(), operationTimeout: 200 });
    const events: StampedeEvent[] = [];
    const stop = onStampedeEvent((event) => events.push(event));
    h.server.setFault(fault);
    let fills = 0;
    const { value, ms } = await timed(() =>
      Promise.all(
        Array.from({ length: 20 }, () =>
          getOrComputeWith(cache, 'k', { ttl: 60_000, distributedFillLock: true }, async () => {
            fills++;
            await sleep(FILL_MS);
            return 'from the fill';
          }),
        ),
      ),
    );
    stop();
    expect(value).toEqual(Array.from({ length: 20 }, () => 'from the fill'));
    expect(fills).toBe(1);
    // get (200) + lock (200) + fill (50) at worst, with room for a slow machine.
    expect(ms).toBeLessThan(1_500);
    expect(stats().misses).toBe(20);
    expect(stats().backendErrors).toBeGreaterThanOrEqual(2);
    const operations = events.flatMap((event) => (event.type === 'backend-error' ? [event.operation] : []));
    expect(operations).toEqual(expect.arrayContaining(['get', 'lock']));
    if (fault === 'hang') {
      const backend = events.find((event) => event.type === 'backend-error');
      expect(backend?.type === 'backend-error' && isUpstashCacheError(backend.error)).toBe(true);
    }
  });
});

describe('operationTimeout', () => {
  it('bounds a hanging server to about operationTimeout per request (default 1000 ms)', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix() });
    h.server.setFault('hang');
    const { value: error, ms } = await timed(() => cache.get('k').catch((e: unknown) => e));
    expect(isUpstashCacheError(error)).toBe(true);
    expect((error as { code: string }).code).toBe('E_STAMPEDE_BACKEND_TIMEOUT');
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(1_500);
  });

  it('cuts the client’s own retries short', async () => {
    const port = await freePort();
    const client = upstashClient(`http://127.0.0.1:${port}`, 'token', { retries: 5 });
    const cache = createUpstashCache({ client, prefix: h.nextPrefix(), operationTimeout: 300 });
    const { value: error, ms } = await timed(() => cache.get('k').catch((e: unknown) => e));
    expect(isUpstashCacheError(error)).toBe(true);
    expect(ms).toBeLessThan(800);
  });
});

describe('an unreachable server', () => {
  it('rejects each call quickly with the network error, and getOrCompute still answers', async () => {
    const port = await freePort();
    const cache = createUpstashCache({ client: upstashClient(`http://127.0.0.1:${port}`, 'token') });
    const { value: error, ms } = await timed(() => cache.get('k').catch((e: unknown) => e));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('fetch failed');
    expect(ms).toBeLessThan(500);
    const answer = await timed(() =>
      getOrComputeWith(cache, 'k', { ttl: 1_000, distributedFillLock: true }, () => 'local'),
    );
    expect(answer.value).toBe('local');
    expect(answer.ms).toBeLessThan(500);
    // The write runs after the callers have their value: wait for it to fail too.
    await waitFor(() => stats().backendErrors >= 3, { timeout: 2_000, message: 'the write to fail' });
    expect(stats().backendErrors).toBe(3);
  });
});

describe('recovery', () => {
  it('caches again once the server is healthy', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix(), operationTimeout: 200 });
    h.server.setFault('500');
    let fills = 0;
    const fill = () => ++fills;
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill)).toBe(1);
    // The write runs after the callers have their value: let it fail before healing the server.
    await waitFor(() => stats().backendErrors >= 2, { timeout: 2_000, message: 'the write to fail' });
    expect(stats().backendErrors).toBe(2);
    h.server.setFault(null);
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill)).toBe(2);
    // Its write lands after the caller has the value; the flight leaves the registry once it has.
    await waitFor(() => inFlightCount(cache) === 0, { timeout: 2_000, message: 'the write to land' });
    const hitsBefore = stats().hits;
    expect(await getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill)).toBe(2);
    expect(stats().hits).toBe(hitsBefore + 1);
    expect(fills).toBe(2);
  });
});
