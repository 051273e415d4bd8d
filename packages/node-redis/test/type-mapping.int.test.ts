import {
  type BackendErrorEvent,
  createTieredCache,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  invalidateTag,
  onStampedeEvent,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { createClient, RESP_TYPES } from 'redis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { asText } from '../src/client.js';
import { createNodeRedisCache, type NodeRedisCache } from '../src/index.js';

// A client made `withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer })`, as applications that store
// bytes configure it, answers every string as a Buffer. Before, every stored entry failed to decode:
// each call ran its fill, seen only as `backend-error` (decode) events.
const faults: BackendErrorEvent[] = [];
const closers: (() => unknown)[] = [];
let stopListening: () => void = () => {};
let url: string;

beforeAll(async () => {
  url = (await testRedis()).url;
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') faults.push(event);
  });
});

afterAll(async () => {
  stopListening();
  for (const close of closers.reverse()) await close();
});

/** Until the fills of `caches` have written: a flight answers its key's callers until then. */
const written = (...caches: Parameters<typeof inFlightCount>[0][]) =>
  waitFor(() => caches.every((cache) => inFlightCount(cache) === 0), { message: 'the writes' });

async function bufferCache(name: string, prefix: string): Promise<NodeRedisCache> {
  const base = createClient({ url });
  base.on('error', () => {});
  await base.connect();
  closers.push(() => base.destroy());
  const client = base.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  const cache = createNodeRedisCache({
    client: client as unknown as Parameters<typeof createNodeRedisCache>[0]['client'],
    name,
    prefix,
  });
  closers.push(() => cache.close());
  return cache;
}

it('a client that answers strings as Buffers: hits, one fill per herd with push wake-up, tags, deletes and the bus', async () => {
  const prefix = randomPrefix('nr-buffers');
  const [a, b] = [await bufferCache('nr-buffers-a', prefix), await bufferCache('nr-buffers-b', prefix)];
  const options = { ttl: 60_000, distributedFillLock: true, tags: ['buffers'], lockPollInterval: 5_000 };
  let fills = 0;
  const started = performance.now();
  await Promise.all(
    [a, b].flatMap((cache) =>
      Array.from({ length: 5 }, () =>
        getOrComputeWith(cache, 'k', options, async () => {
          fills++;
          await new Promise((resolve) => setTimeout(resolve, 100));
          return { n: fills };
        }),
      ),
    ),
  );
  expect(fills).toBe(1);
  // Polling alone would take 5 s: the waiters were woken by the announcement.
  expect(performance.now() - started).toBeLessThan(2_000);
  expect(await getOrComputeWith(b, 'k', options, () => ({ n: 99 }))).toEqual({ n: 1 });
  await written(a, b);
  await invalidateTag(a, 'buffers');
  expect(await getOrComputeWith(b, 'k', options, () => ({ n: 100 }))).toEqual({ n: 100 });
  await written(a, b);
  await invalidate(a, 'k');
  expect(await getOrComputeWith(b, 'k', options, () => ({ n: 101 }))).toEqual({ n: 101 });
  const [tieredA, tieredB] = [a, b].map((remote) =>
    createTieredCache({ local: createMemoryCache(), remote, name: `tiered-${remote.name}` }),
  ) as [ReturnType<typeof createTieredCache>, ReturnType<typeof createTieredCache>];
  closers.push(
    () => tieredA.close(),
    () => tieredB.close(),
  );
  await getOrComputeWith(tieredA, 'bus', { ttl: 60_000 }, () => 1);
  await getOrComputeWith(tieredB, 'bus', { ttl: 60_000 }, () => 1);
  await written(tieredA, tieredB);
  await invalidate(tieredA, 'bus');
  await expect.poll(() => getOrComputeWith(tieredB, 'bus', { ttl: 60_000 }, () => 2)).toBe(2);
  expect(faults.filter((fault) => fault.cache.startsWith('nr-buffers'))).toEqual([]);
});

it('asText turns byte strings into text wherever a reply holds them', () => {
  const bytes = (text: string) => Buffer.from(text);
  expect(asText(bytes('s2|1|2|3|4|"v"'))).toBe('s2|1|2|3|4|"v"');
  expect(asText([1, bytes('a'), [bytes('b'), null]])).toEqual([1, 'a', ['b', null]]);
  expect(asText({ 'maxmemory-policy': bytes('noeviction') })).toEqual({ 'maxmemory-policy': 'noeviction' });
  expect(asText(new Map([[bytes('k'), bytes('v')]]))).toEqual(new Map([['k', 'v']]));
  for (const plain of ['text', 7, null, undefined, ['a', 1]]) expect(asText(plain)).toEqual(plain);
});
