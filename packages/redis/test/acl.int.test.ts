import { readFileSync } from 'node:fs';
import {
  getOrComputeWith,
  onStampedeEvent,
  type StampedeEvent,
  statsByCache,
  type WarningEvent,
} from '@stampede/core';
import { type RedisServer, startRedisServer } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';

// Redis users with limited permissions (ACL), created on a server started here.
let server: RedisServer;
let admin: Redis;
const clients: Redis[] = [];
const caches: RedisCache[] = [];
const events: StampedeEvent[] = [];
let stopListening: () => void = () => {};

// The line the README gives users to paste (its password placeholder replaced).
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const DOCUMENTED = /^ACL SETUSER stampede .*$/m.exec(README)?.[0];

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
  const users: Record<string, string[]> = {
    noscripts: ['on', '>pw', '~*', '&*', '+@all', '-eval', '-evalsha', '-eval_ro', '-evalsha_ro'],
    nopublish: ['on', '>pw', '~*', '&*', '+@all', '-publish'],
  };
  for (const [user, rules] of Object.entries(users)) await admin.call('ACL', 'SETUSER', user, ...rules);
  if (DOCUMENTED !== undefined) {
    const [, , ...rules] = DOCUMENTED.replace('>CHANGE-ME', '>pw').split(' ');
    await admin.call('ACL', 'SETUSER', ...(rules as [string, ...string[]]));
  }
  stopListening = onStampedeEvent((event) => events.push(event));
});

afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await server?.stop();
});

function cacheAs(user: string, name: string): RedisCache {
  const client = new Redis(server.url.replace('redis://', `redis://${user}:pw@`));
  client.on('error', () => {});
  clients.push(client);
  const cache = createRedisCache({ client, name, prefix: 'stampede:' });
  caches.push(cache);
  return cache;
}

const warningsOf = (name: string) =>
  events.filter((event): event is WarningEvent => event.type === 'warning' && event.cache === name);
const backendErrorsOf = (name: string) =>
  events.filter((event) => event.type === 'backend-error' && event.cache === name);

/** `callers` calls on each cache at once, all for `key`; the slowest caller's time and the fill count. */
async function herdOn(cachesInHerd: RedisCache[], key: string, options: object, callers = 20) {
  let fills = 0;
  const started = performance.now();
  const values = await Promise.all(
    cachesInHerd.flatMap((cache) =>
      Array.from({ length: callers }, () =>
        getOrComputeWith(cache, key, options, async () => {
          fills++;
          await new Promise((resolve) => setTimeout(resolve, 200));
          return cache.name;
        }),
      ),
    ),
  );
  return { fills, values, slowestMs: performance.now() - started };
}

describe('a Redis user without EVAL/EVALSHA', () => {
  it('gets one warning per cache, and a locked herd does not wait out lockWaitTimeout: in-process protection only', async () => {
    // Two replicas, created just before the herd (no time to warm up).
    const replicas = [cacheAs('noscripts', 'acl-noscripts-a'), cacheAs('noscripts', 'acl-noscripts-b')];
    const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000 };
    const first = await herdOn(replicas, 'no-scripts', options);
    const second = await herdOn(replicas, 'no-scripts-again', options);
    console.log(
      `[acl] no scripts: slowest caller ${first.slowestMs.toFixed(0)} ms then ${second.slowestMs.toFixed(0)} ms (fill 200 ms, lockWaitTimeout 5 s), ${first.fills} + ${second.fills} fills`,
    );
    for (const herd of [first, second]) {
      expect(herd.slowestMs).toBeLessThan(2_000);
      // One fill per process, as on a cache without a lock.
      expect(herd.fills).toBe(2);
    }
    for (const cache of replicas) {
      expect(cache.tryAcquireFillLock).toBeUndefined();
      const stats = statsByCache()[cache.name];
      expect(stats).toMatchObject({ lockAcquired: 0, lockContended: 0, lockWaitTimeouts: 0 });
      const scriptWarnings = warningsOf(cache.name).filter((w) => /refused a script/.test(w.message));
      expect(scriptWarnings).toHaveLength(1);
      expect(scriptWarnings[0]?.message).toMatch(/NOPERM.*eval/);
      expect(scriptWarnings[0]?.message).toMatch(/in-process only/);
      expect(scriptWarnings[0]?.message).toMatch(/Running Redis for stampede/);
    }
  });
});

describe('a Redis user without PUBLISH', () => {
  it('warns once per cache; the lock is still released and later releases do not announce (nor fail)', async () => {
    const replicas = [cacheAs('nopublish', 'acl-nopublish-a'), cacheAs('nopublish', 'acl-nopublish-b')];
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 100 };
    const keys = ['no-publish-1', 'no-publish-2', 'no-publish-3', 'no-publish-4'];
    let fills = 0;
    for (const key of keys) fills += (await herdOn(replicas, key, options)).fills;
    // One fill per herd: the lock works without its announcement (the waiter polls).
    expect(fills).toBe(keys.length);
    for (const cache of replicas) {
      const warned = warningsOf(cache.name);
      // A cache that released a lock was refused once, then stopped announcing.
      expect(warned).toHaveLength((statsByCache()[cache.name]?.lockAcquired ?? 0) > 0 ? 1 : 0);
      for (const warning of warned) {
        expect(warning.message).toMatch(/refused to PUBLISH/);
        expect(warning.message).toMatch(/poll/);
      }
      // The refused release is retried without the announcement: nothing to report.
      expect(backendErrorsOf(cache.name)).toEqual([]);
      // Scripting is untouched: the lock is still offered.
      expect(typeof cache.tryAcquireFillLock).toBe('function');
    }
    for (const key of keys) expect(await admin.exists(redisKeys('stampede:', key).lock)).toBe(0);
  });
});

describe("the README's ACL line", () => {
  it('is there, and is all a fleet needs: no warning, no fault, one fill, push wake-up and delete work', async () => {
    expect(DOCUMENTED).toBeDefined();
    const replicas = [cacheAs('stampede', 'acl-documented-a'), cacheAs('stampede', 'acl-documented-b')];
    // A 5 s poll interval: the waiter answering well before it shows the announcement arrived.
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 5_000 };
    const herd = await herdOn(replicas, 'documented', options);
    expect(herd.fills).toBe(1);
    expect(herd.slowestMs).toBeLessThan(2_000);
    await replicas[0]?.delete('documented');
    expect(await replicas[1]?.get('documented')).toBeUndefined();
    for (const cache of replicas) {
      expect(warningsOf(cache.name)).toEqual([]);
      expect(backendErrorsOf(cache.name)).toEqual([]);
    }
  });
});
