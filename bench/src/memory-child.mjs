// Scenario 7's worker, in a fresh process so the heap holds nothing else: fills N distinct keys
// through getOrCompute on createMemoryCache({ max }), in concurrent batches, and reports heapUsed
// (after gc) before, once the cache is made (empty), once it is full, and at the end, with the in-flight count and size.
import { getOrCompute, inFlightCount } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';

const keys = Number(process.env.MEMORY_KEYS);
const max = Number(process.env.MEMORY_MAX);
const batch = Number(process.env.MEMORY_BATCH);
const heap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};

const before = heap();
const cache = createMemoryCache({ max });
const created = heap();
const checkpointAt = Math.min(keys, max * 10);
let checkpoint = before;
const t0 = performance.now();
for (let start = 0; start < keys; start += batch) {
  const pending = [];
  for (let i = start; i < Math.min(keys, start + batch); i++) {
    pending.push(getOrCompute(cache, `key:${i}`, '5m', () => ({ id: i, name: `value ${i}` })));
  }
  await Promise.all(pending);
  if (start + batch === checkpointAt) checkpoint = heap();
}
const took = performance.now() - t0;
const after = heap();
process.send(
  {
    keys,
    max,
    before,
    created,
    checkpoint,
    checkpointAt,
    after,
    inFlight: inFlightCount(cache),
    size: cache.size,
    took,
  },
  () => process.exit(0),
);
