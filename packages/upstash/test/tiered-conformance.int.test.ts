import { createTieredCache, type TieredCache } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { describeCacheConformance } from '@stampede/test-suite';
import { TIERED_ON_REDIS_PROTOCOL_CAPABILITIES } from '@stampede/test-support';
import { afterAll, beforeAll } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

// The conformance suite on a tiered cache: memory in front of Upstash (the local REST server in
// front of Redis). Each instance and each replica has its own L1, client and bus stream.
let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-tiered-conf');
});
const tiered: TieredCache[] = [];
afterAll(async () => {
  for (const cache of tiered) cache.close();
  await h?.stop();
});

const prefixes = new WeakMap<object, string>();
function tieredOn(prefix: string): TieredCache {
  const remote = createUpstashCache({ client: h.client(), prefix });
  const cache = createTieredCache({ local: createMemoryCache({ max: 1_000 }), remote, localTtl: 60_000 });
  tiered.push(cache);
  prefixes.set(cache, prefix);
  return cache;
}

describeCacheConformance({
  name: 'tiered (memory in front of upstash)',
  clock: 'real',
  // Another replica's delete reaches this one's L1 through a bus message, a moment later.
  replicaLag: true,
  // The lock, push wake-up and round trip are the remote's; the bus is consumed, not offered. Tags
  // are invalidated in Redis and carried to the other replicas' L1 by the bus. Its own methods refuse
  // bad arguments before L1 or the remote is touched.
  capabilities: TIERED_ON_REDIS_PROTOCOL_CAPABILITIES,
  create: () => tieredOn(h.nextPrefix()),
  replica(of) {
    const prefix = prefixes.get(of);
    if (prefix === undefined) throw new Error('replica of an unknown cache');
    return tieredOn(prefix);
  },
});
