import {
  type BackendErrorEvent,
  getOrCompute,
  getOrComputeWith,
  onStampedeEvent,
  statsByCache,
  whenIdle,
} from '@stampede/core';
import { decodeEnvelope, encodeEnvelope } from '@stampede/core/adapter';
import { createRedisCache, type RedisCache, redisKeys } from '@stampede/redis';
import { randomPrefix, testRedis } from '@stampede/test-support';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deletePrefix, sharedRedis } from './support/redis.js';

// Garbage written straight into Redis at the adapter's key: the adapter must read it as a miss,
// count a backend error (operation 'decode', or 'get'), and let the fill run.
const RUNS = 200;
const prefix = randomPrefix('chaos-fuzz');
let client: Redis;
let cache: RedisCache;
const events: BackendErrorEvent[] = [];
let off: () => void = () => {};

beforeAll(async () => {
  client = new Redis((await sharedRedis()).url);
  cache = createRedisCache({ client, prefix, name: 'chaos-fuzz' });
  off = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});

afterAll(async () => {
  off();
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

/** True when the adapter would accept `text` as an entry (so it is not garbage after all). */
function decodes(text: string): boolean {
  if (text.startsWith('t|')) return true; // a tombstone: a miss without an event, by design
  try {
    decodeEnvelope(text);
    return true;
  } catch {
    return false;
  }
}

const now = Date.now();
const envelope = encodeEnvelope({
  value: { id: 42, name: 'bookmark', tags: ['a', 'b'] },
  createdAt: now,
  freshUntil: now + 60_000,
  staleUntil: now + 120_000,
});

const garbage = fc.oneof(
  fc.uint8Array({ minLength: 0, maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
  fc.json().map((text) => Buffer.from(text)),
  fc.nat({ max: envelope.length - 1 }).map((at) => Buffer.from(envelope.slice(0, at))),
  fc
    .tuple(fc.nat({ max: envelope.length - 1 }), fc.string({ unit: 'binary', maxLength: 8 }))
    .map(([at, junk]) => Buffer.from(envelope.slice(0, at) + junk + envelope.slice(at + 1))),
  fc
    .tuple(
      fc.constantFrom('s1|', 's2|', 's1t|', 's2t|', 's0|', 'S1|', 's1||', 's1|x|y|z|'),
      fc.string({ maxLength: 40 }),
    )
    .map(([head, rest]) => Buffer.from(head + rest)),
);

let n = 0;

async function plant(bytes: Buffer): Promise<{ key: string; stored: string }> {
  const key = `fuzz-${++n}`;
  await client.set(redisKeys(prefix, key).value, bytes, 'PX', 60_000);
  // What the adapter will read back (ioredis decodes replies as UTF-8).
  return { key, stored: (await client.get(redisKeys(prefix, key).value)) ?? '' };
}

describe('envelope decoder fuzzed through the Redis adapter', () => {
  it('getOrCompute never throws on garbage: a miss, a decode/get backend-error event, and a fill', async () => {
    let garbageSeen = 0;
    await fc.assert(
      fc.asyncProperty(garbage, async (bytes) => {
        const { key, stored } = await plant(bytes);
        fc.pre(stored !== '' && !decodes(stored));
        garbageSeen++;
        const before = statsByCache()['chaos-fuzz'];
        const eventsBefore = events.length;
        let fills = 0;
        const value = await getOrCompute(cache, key, 60_000, () => {
          fills++;
          return 'filled';
        });
        const after = statsByCache()['chaos-fuzz'];
        expect(value).toBe('filled');
        expect(fills).toBe(1);
        expect((after?.misses ?? 0) - (before?.misses ?? 0)).toBe(1);
        expect((after?.backendErrors ?? 0) - (before?.backendErrors ?? 0)).toBeGreaterThanOrEqual(1);
        const mine = events.slice(eventsBefore).filter((event) => event.key === key);
        expect(mine.length).toBeGreaterThanOrEqual(1);
        for (const event of mine) expect(['decode', 'get']).toContain(event.operation);
        // The fill's value replaced the garbage (read once the write has landed: until then the
        // next call would join the fill and get its value whatever Redis holds).
        await whenIdle(cache);
        expect(await getOrCompute(cache, key, 60_000, () => 'second fill')).toBe('filled');
      }),
      { numRuns: RUNS },
    );
    console.log(`[fuzz] ${garbageSeen} undecodable entries read as misses and refilled`);
    expect(garbageSeen).toBeGreaterThan(RUNS / 2);
  });

  it('the same with the fill lock and SWR: garbage is a miss, never a stale value or a failed call', async () => {
    await fc.assert(
      fc.asyncProperty(garbage, async (bytes) => {
        const { key, stored } = await plant(bytes);
        fc.pre(stored !== '' && !decodes(stored));
        const value = await getOrComputeWith(
          cache,
          key,
          { ttl: 60_000, staleWhileRevalidate: 60_000, distributedFillLock: true },
          () => 'locked fill',
        );
        expect(value).toBe('locked fill');
      }),
      { numRuns: RUNS / 2 },
    );
  });
});
