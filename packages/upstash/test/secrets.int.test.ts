import { getOrComputeWith, invalidate, onStampedeEvent, setValue } from '@stampede/core';
import { freePort, randomPrefix, testRedis } from '@stampede/test-support';
import { startUpstashRestServer, type UpstashRestServer } from '@stampede/upstash-rest-server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { upstashClient } from './harness.js';

// Distinctive tokens: if either shows up anywhere a user could see it, the test finds it.
const TOKEN = `right-s3cret-${Math.random().toString(36).slice(2)}`;
const WRONG = `wrong-s3cret-${Math.random().toString(36).slice(2)}`;

/** Everything reachable from a value that a logger or JSON.stringify could print. */
function dump(value: unknown, seen = new Set<unknown>()): string {
  if (value === null || typeof value !== 'object') return String(value);
  if (seen.has(value)) return '';
  seen.add(value);
  const parts: string[] = [];
  if (value instanceof Error)
    parts.push(value.name, value.message, value.stack ?? '', dump(value.cause, seen));
  for (const key of Object.getOwnPropertyNames(value)) {
    parts.push(key, dump((value as Record<string, unknown>)[key], seen));
  }
  return parts.join(' ');
}

let server: UpstashRestServer;
beforeAll(async () => {
  server = await startUpstashRestServer({ redisUrl: (await testRedis()).url, token: TOKEN });
});
afterAll(async () => {
  await server?.close();
});

describe('no Upstash token appears in an error, an event or a log line', () => {
  it('through server faults, a wrong token and an unreachable server', async () => {
    const seen: string[] = [];
    const stop = onStampedeEvent((event) => seen.push(dump(event)));
    const spies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((level) =>
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
        seen.push(args.map((arg) => dump(arg)).join(' '));
      }),
    );
    const unreachable = `http://127.0.0.1:${await freePort()}`;
    const caches = [
      createUpstashCache({
        client: upstashClient(server.url, TOKEN),
        prefix: randomPrefix('secret'),
        operationTimeout: 200,
      }),
      createUpstashCache({
        client: upstashClient(server.url, WRONG),
        prefix: randomPrefix('secret'),
        operationTimeout: 200,
      }),
      createUpstashCache({
        client: upstashClient(unreachable, TOKEN),
        prefix: randomPrefix('secret'),
        operationTimeout: 200,
      }),
    ];
    try {
      for (const fault of ['500', 'garbage', 'reset', 'hang', null] as const) {
        server.setFault(fault);
        for (const cache of caches) {
          const value = await getOrComputeWith(
            cache,
            'k',
            { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 300 },
            () => 'filled',
          );
          expect(value).toBe('filled');
          for (const call of [() => setValue(cache, 'k', 1, { ttl: 1_000 }), () => invalidate(cache, 'k')]) {
            await call().catch((error: unknown) => seen.push(dump(error)));
          }
        }
      }
    } finally {
      server.setFault(null);
      stop();
      for (const spy of spies) spy.mockRestore();
    }
    expect(seen.length).toBeGreaterThan(10);
    for (const text of seen) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(WRONG);
    }
  });
});
