import { getOrComputeWith } from '@stampede/core';
import {
  type RedisServer,
  randomPrefix,
  startRedisServer,
  type Worker,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { herd, startReplicas, stopWorkers, totals } from './helpers.js';

// Cold start: the first herd after a deploy (fresh processes, and a Redis whose script cache is
// empty) must not pay for loading scripts or connecting the subscriber on its critical path. The
// server is started here, so its script cache and its command statistics are ours to reset.
let server: RedisServer;
let admin: Redis;
let workers: Worker[] = [];
const clients: Redis[] = [];
const caches: RedisCache[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
});

afterAll(async () => {
  await stopWorkers(workers);
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await server?.stop();
});

/** `INFO commandstats` as `{ command: { calls, failed_calls } }`. */
async function commandStats(): Promise<Record<string, { calls: number; failed: number }>> {
  const stats: Record<string, { calls: number; failed: number }> = {};
  for (const line of (await admin.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),.*failed_calls=(\d+)/.exec(line.trim());
    if (match) stats[match[1] as string] = { calls: Number(match[2]), failed: Number(match[3]) };
  }
  return stats;
}

/** How many connections the server has. */
async function connections(): Promise<number> {
  return String(await admin.client('LIST'))
    .trim()
    .split('\n').length;
}

async function freshServerState(): Promise<void> {
  await admin.script('FLUSH');
  await admin.config('RESETSTAT');
}

describe('cold start', () => {
  it('a cache used the moment it is created: no NOSCRIPT, no EVAL fallback, the subscriber already open', async () => {
    await freshServerState();
    const before = await connections();
    const replicas = [0, 1, 2].map((index) => {
      const client = new Redis(server.url);
      clients.push(client);
      const cache = createRedisCache({ client, name: `cold-${index}`, prefix: randomPrefix('cold') });
      caches.push(cache);
      return cache;
    });
    const options = { ttl: 60_000, distributedFillLock: true };
    // Three callers per cache at once; each cache has its own prefix, so each takes its own lock,
    // writes and releases (every script runs) and none waits for a lock.
    await Promise.all(
      replicas.flatMap((cache) =>
        [0, 1, 2].map(() => getOrComputeWith(cache, 'k', options, async () => 'filled')),
      ),
    );
    await Promise.all(replicas.map((cache) => cache.delete('k')));
    const stats = await commandStats();
    expect(stats['script|load']?.calls).toBeGreaterThanOrEqual(5);
    expect(stats.evalsha?.calls).toBeGreaterThan(0);
    expect(stats.evalsha?.failed ?? 0).toBe(0);
    expect(stats.eval?.calls ?? 0).toBe(0);
    // Each cache's subscriber was opened by its warm-up, not by a lock wait (nobody waited here).
    await waitFor(async () => (await connections()) === before + 2 * replicas.length, {
      timeout: 2_000,
      message: 'a subscriber connection beside each client',
    });
  });

  it('the warm-up draws a lock token, so Web Crypto is set up before the first lock attempt', async () => {
    const client = new Redis(server.url);
    clients.push(client);
    // Node sets Web Crypto up on its first use (about 1 ms alone, more on a busy machine): drawn
    // at creation, a lock token costs the first herd nothing but the draw.
    const draws = vi.spyOn(globalThis.crypto, 'getRandomValues');
    try {
      const cache = createRedisCache({ client, name: 'cold-crypto', prefix: randomPrefix('cold-crypto') });
      caches.push(cache);
      expect(draws).toHaveBeenCalledTimes(1);
    } finally {
      draws.mockRestore();
    }
  });

  it('the first herd of fresh processes runs like the second one (within the fill + a few round trips)', async () => {
    await freshServerState();
    const prefix = randomPrefix('cold-fleet');
    workers = await startReplicas(4, { url: server.url, prefix });
    const fillMs = 200;
    const options = { ttl: 60_000, distributedFillLock: true };
    const cold = totals(await herd(workers, { key: 'cold', callers: 50, fillMs, options }));
    const warm = totals(await herd(workers, { key: 'warm', callers: 50, fillMs, options }));
    const stats = await commandStats();
    console.log(
      `[cold start] 4 fresh processes x 50 callers, fill ${fillMs} ms: slowest caller cold +${cold.maxMs - fillMs} ms, warm +${warm.maxMs - fillMs} ms beyond the fill; EVAL fallbacks ${stats.eval?.calls ?? 0}`,
    );
    for (const sum of [cold, warm]) {
      expect(sum.errors).toEqual([]);
      expect(sum.answered).toBe(200);
      expect(sum.fills).toBe(1);
    }
    expect(stats.eval?.calls ?? 0).toBe(0);
    expect(stats.evalsha?.failed ?? 0).toBe(0);
    // Generous (2 shared cores, other test runs beside): docs/reliability.md gives the figure
    // measured. A missing warm-up fails the command statistics above whatever the timing.
    expect(cold.maxMs).toBeLessThan(fillMs + 400);
  });
});
