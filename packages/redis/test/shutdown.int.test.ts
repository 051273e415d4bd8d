import { fileURLToPath } from 'node:url';
import { getOrComputeWith, getValue, statsByCache } from '@stampede/core';
import { randomPrefix, spawnWorker, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, redisKeys } from '../src/index.js';
import { deletePrefix } from './helpers.js';

// A replica shut down (SIGTERM, then the README's `await cache.close(); await client.quit()`)
// while a fill runs. Before `close()` waited for the cache's work, the fill's write and lock
// release went to a client that had quit: the value was lost and the lock stayed until `lockTtl`,
// so every other replica's callers on the key waited out `lockWaitTimeout` (5 s) and filled again.
const FIXTURE = fileURLToPath(new URL('./fixtures/shutdown-mid-fill.mjs', import.meta.url));
const FILL_MS = 800;
const prefix = randomPrefix('shutdown');
let url: string;
let client: Redis;

beforeAll(async () => {
  url = (await testRedis()).url;
  client = new Redis(url);
});
afterAll(async () => {
  await deletePrefix(client, prefix);
  client.disconnect();
  await (await testRedis()).stop();
});

async function shutDownMidFill(key: string, mode: 'caller' | 'refresh') {
  const replica = spawnWorker(FIXTURE, [JSON.stringify({ url, prefix, key, fillMs: FILL_MS, mode })]);
  await replica.next((report: { id?: string }) => report.id === 'filling');
  process.kill(replica.pid, 'SIGTERM');
  return replica;
}

describe('a replica shut down while it fills', () => {
  it("its callers' fill is stored and the lock released: another replica waiting on it gets the value, no fill of its own", async () => {
    const key = 'caller-fill';
    const replica = await shutDownMidFill(key, 'caller');
    const other = createRedisCache({ client, prefix, name: 'shutdown-other' });
    let fills = 0;
    const startedAt = Date.now();
    const value = await getOrComputeWith(other, key, { ttl: 60_000, distributedFillLock: true }, () => {
      fills++;
      return 'filled again';
    });
    const waitedMs = Date.now() - startedAt;
    console.log(
      `[shutdown] the other replica answered in ${waitedMs} ms (fill ${FILL_MS} ms, lockWaitTimeout 5 s)`,
    );
    expect(value).toBe('from the closing replica');
    expect(fills).toBe(0);
    // Woken by the closing replica's announcement at the end of its fill, not by lockWaitTimeout.
    expect(waitedMs).toBeLessThan(FILL_MS + 2_000);
    expect(statsByCache()['shutdown-other']?.lockWaitHits).toBe(1);
    const closed = await replica.next((report: { id?: string; closeMs?: number }) => report.id === 'closed');
    console.log(`[shutdown] the closing replica's close() + quit() took ${closed.closeMs} ms`);
    expect(closed.closeMs).toBeGreaterThan(0);
    await other.close();
  });

  it('its background refresh is written and its lock released before the process exits', async () => {
    const key = 'background-refresh';
    const replica = await shutDownMidFill(key, 'refresh');
    await replica.next((report: { id?: string }) => report.id === 'closed');
    const other = createRedisCache({ client, prefix, name: 'shutdown-reader' });
    expect(await getValue(other, key)).toBe('from the closing replica');
    expect(await client.exists(redisKeys(prefix, key).lock)).toBe(0);
    await other.close();
  });
});
