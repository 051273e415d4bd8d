import { type BackendErrorEvent, getOrCompute, onStampedeEvent, type WarningEvent } from '@stampede/core';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createUpstashCache } from '../src/index.js';
import { type Harness, startHarness } from './harness.js';

// A value over the database's request size limit (Upstash: 10 MB on the free and pay-as-you-go
// plans; 64 kB on this server): every write is refused with `ERR max request size exceeded`, so the
// key is never cached and each call runs its fill.
const LIMIT = 64 * 1_024;
let harness: Harness;
const warnings: WarningEvent[] = [];
const writeFaults: BackendErrorEvent[] = [];
let stopListening: () => void = () => {};

beforeAll(async () => {
  harness = await startHarness('refused', { maxRequestBytes: LIMIT });
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'warning') warnings.push(event);
    if (event.type === 'backend-error' && event.operation === 'set') writeFaults.push(event);
  });
});

afterAll(async () => {
  stopListening();
  await harness?.stop();
});

it('a value over the request size limit, refused three times in a row: one warning with the reply, not the value', async () => {
  const cache = createUpstashCache({
    client: harness.client(),
    prefix: harness.nextPrefix(),
    name: 'upstash-refused',
    pushWakeUp: false,
  });
  const big = 'v'.repeat(LIMIT + 1_024);
  let fills = 0;
  for (let i = 0; i < 4; i++) {
    const faults = writeFaults.length;
    expect(
      await getOrCompute(cache, 'big', '1m', () => {
        fills++;
        return big;
      }),
    ).toBe(big);
    await vi.waitFor(() => expect(writeFaults.length).toBe(faults + 1));
  }
  expect(fills).toBe(4);
  // The client's error carries the whole command, value included: the event has its name only.
  const fault = writeFaults.at(-1)?.error as Error;
  // (The name is the first command of the request: with auto-pipelining, maybe another one.)
  expect(fault.message).toMatch(/^ERR max request size exceeded, command was: [a-z]+ \[redacted\]$/);
  expect(`${fault.stack} ${JSON.stringify(writeFaults)}`).not.toContain('vvvv');
  const warned = warnings.filter((warning) => warning.cache === 'upstash-refused');
  expect(warned).toHaveLength(1);
  expect(warned[0]?.message).toContain("'big' in cache 'upstash-refused' (ERR max request size exceeded)");
  expect(warned[0]?.message).not.toContain('vvvv');
  // A value within the limit is stored as usual.
  await getOrCompute(cache, 'small', '1m', () => 'small');
  await vi.waitFor(async () => expect((await cache.get('small'))?.value).toBe('small'));
});
