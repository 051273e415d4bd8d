import { describeCacheConformance } from '@stampede/test-suite';
import { afterAll, beforeAll } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('upstash-conf');
});
afterAll(async () => {
  await h?.stop();
});

describeCacheConformance({
  name: 'upstash (automaticDeserialization on, auto-pipelining on)',
  clock: 'real',
  create: () => createUpstashCache({ client: h.client(), prefix: h.nextPrefix() }),
});

describeCacheConformance({
  name: 'upstash (automaticDeserialization off, auto-pipelining off)',
  clock: 'real',
  create: () =>
    createUpstashCache({
      client: h.client({ automaticDeserialization: false, autoPipelining: false }),
      prefix: h.nextPrefix(),
    }),
});
