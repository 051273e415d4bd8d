import { describeCacheConformance } from '@stampede/test-suite';
import { REDIS_PROTOCOL_CAPABILITIES } from '@stampede/test-support';
import { afterAll, beforeAll } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type ClientMode, type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-conf');
});
afterAll(async () => {
  await h?.stop();
});

// A lock with extend, values through a serializer, push wake-up and the bus over server-sent events;
// its methods refuse bad arguments.
const capabilities = REDIS_PROTOCOL_CAPABILITIES;

function conformance(name: string, mode: ClientMode): void {
  const prefixes = new WeakMap<object, string>();
  const cacheOn = (prefix: string) => {
    const cache = createUpstashCache({ client: h.client(mode), prefix });
    prefixes.set(cache, prefix);
    return cache;
  };
  describeCacheConformance({
    name,
    clock: 'real',
    capabilities,
    create: () => cacheOn(h.nextPrefix()),
    // Another replica: its own client on the same prefix.
    replica(of) {
      const prefix = prefixes.get(of);
      if (prefix === undefined) throw new Error('replica of an unknown cache');
      return cacheOn(prefix);
    },
  });
}

conformance('upstash (automaticDeserialization on, auto-pipelining on)', {});
conformance('upstash (automaticDeserialization off, auto-pipelining off)', {
  automaticDeserialization: false,
  autoPipelining: false,
});
