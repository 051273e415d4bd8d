import { type BackendErrorEvent, getOrCompute, inFlightCount, onStampedeEvent } from '@stampede/core';
import { type RedisServer, randomPrefix, startRedisServer } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';

// A Redis that answers reads but holds every write (CLIENT PAUSE ... WRITE, on a server this test
// starts itself): a miss must answer when its fill ends, not when the write lands.

let server: RedisServer;
let client: Redis;
let admin: Redis;
let cache: RedisCache;
const prefix = randomPrefix('slow-write');
const events: BackendErrorEvent[] = [];
let stopListening: () => void;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The fill takes this long on purpose: the miss must answer when it ends, whatever the held write does. */
const FILL_MS = 50;

beforeAll(async () => {
  server = await startRedisServer();
  client = new Redis(server.url);
  admin = new Redis(server.url);
  cache = createRedisCache({ client, prefix, operationTimeout: 2_000 });
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterAll(async () => {
  stopListening();
  await admin.call('CLIENT', 'UNPAUSE').catch(() => {});
  await cache.close();
  client.disconnect();
  admin.disconnect();
  await server.stop();
});

it('a miss answers when its 50 ms fill ends while Redis holds the write; a caller arriving meanwhile joins the flight', async () => {
  // Connect and measure the clock offset first (reads: a paused server still serves them).
  expect(await cache.get('warm-up')).toBeUndefined();
  await admin.call('CLIENT', 'PAUSE', '20000', 'WRITE');
  const fill = vi.fn(async () => {
    await sleep(FILL_MS);
    return 'v';
  });
  const started = performance.now();
  const value = await getOrCompute(cache, 'k', 60_000, fill);
  const missMs = performance.now() - started;
  // Answered with the write still held: the flight stays registered until it lands, no fault yet.
  expect(value).toBe('v');
  expect(inFlightCount(cache)).toBe(1);
  expect(events).toEqual([]);
  expect(await admin.get(redisKeys(prefix, 'k').value)).toBeNull();
  const joined = performance.now();
  expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
  const joinMs = performance.now() - joined;
  expect(fill).toHaveBeenCalledTimes(1);
  console.log(
    `[slow write] writes held by CLIENT PAUSE WRITE, operationTimeout 2 s, fill 50 ms: miss answered in ${missMs.toFixed(0)} ms; a caller arriving during the write in ${joinMs.toFixed(1)} ms`,
  );
  // Generous bound for a shared machine; the write alone would take up to operationTimeout (2 s).
  expect(missMs).toBeLessThan(1_000);
  await admin.call('CLIENT', 'UNPAUSE');
  await vi.waitFor(() => expect(inFlightCount(cache)).toBe(0), { interval: 5 });
  expect(await admin.get(redisKeys(prefix, 'k').value)).toMatch(/^s2\|/);
  expect(await getOrCompute(cache, 'k', 60_000, fill)).toBe('v');
  expect(fill).toHaveBeenCalledTimes(1);
  expect(events).toEqual([]);
});
