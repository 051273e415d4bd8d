import { setValue } from '@stampede/core';
import { createRedisCache } from '@stampede/redis';
import { randomPrefix, testRedis, type Worker } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allReady, closeApps, herd, startApps, totals } from './support/fleet.js';
import { type ChaosProxy, type ProxyMode, startProxy } from './support/proxy.js';
import { deletePrefix, sharedRedis, sleep } from './support/redis.js';

// Two app processes talk to a real Redis through the chaos proxy; this process drives the faults.
const APPS = 2;
const CALLERS = 40;
const OPERATION_TIMEOUT = 250;
const FILL_MS = 150;
const LOCK_WAIT_TIMEOUT = 2_000;
// Two shared cores, other engineers' tests, process scheduling: added to every computed bound.
const SLACK = 1_000;
/** Freshness of the stale seed (ms): it lapses before the herd runs, the stale grace does not. */
const SEED_TTL = 1;

interface Fault {
  readonly name: string;
  readonly mode: ProxyMode;
  /** True when Redis still answers within operationTimeout (protection must hold). */
  readonly usable: boolean;
}

const FAULTS: readonly Fault[] = [
  {
    name: 'latency 40 ms each way (below operationTimeout)',
    mode: { kind: 'latency', ms: 40 },
    usable: true,
  },
  {
    name: 'latency 400 ms each way (above operationTimeout)',
    mode: { kind: 'latency', ms: 400 },
    usable: false,
  },
  { name: 'connections reset, reconnects refused', mode: { kind: 'refuse' }, usable: false },
  { name: 'black hole (accepted, never forwarded)', mode: { kind: 'blackhole' }, usable: false },
];

interface Variant {
  readonly name: string;
  readonly options: Record<string, unknown>;
  readonly lock: boolean;
  readonly seedStale: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'no lock', options: { ttl: 60_000 }, lock: false, seedStale: false },
  {
    name: 'distributedFillLock',
    options: { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: LOCK_WAIT_TIMEOUT },
    lock: true,
    seedStale: false,
  },
  {
    name: 'distributedFillLock + SWR on a stale key',
    options: {
      ttl: 60_000,
      staleWhileRevalidate: 60_000,
      distributedFillLock: true,
      lockWaitTimeout: LOCK_WAIT_TIMEOUT,
    },
    lock: true,
    seedStale: true,
  },
];

/**
 * The documented bound of one call: sequential backend calls on its path x operationTimeout, plus
 * the fill. Without the lock a miss is one read (the write happens after the caller has its value).
 * With the lock: read, lock, the holder's double-check read, then the fill; when Redis is usable a
 * loser also waits for the holder's write, release and publish and does one more read (7 calls).
 * When Redis is unusable no lock wait can start: a failed lock attempt means a local fill.
 */
function bound(fault: Fault, variant: Variant): { ms: number; formula: string } {
  const calls = !variant.lock ? 1 : fault.usable ? 7 : 3;
  return {
    ms: calls * OPERATION_TIMEOUT + FILL_MS + SLACK,
    formula: `${calls} x ${OPERATION_TIMEOUT} + ${FILL_MS} (fill) + ${SLACK} (slack)`,
  };
}

const prefix = randomPrefix('chaos-proxy');
let direct: Redis;
let proxy: ChaosProxy;
let apps: Worker[] = [];
const measured: string[] = [];

beforeAll(async () => {
  const redis = await sharedRedis();
  direct = new Redis(redis.url);
  proxy = await startProxy(redis.port, redis.host);
  apps = await startApps(APPS, { url: proxy.url(redis.auth), prefix, operationTimeout: OPERATION_TIMEOUT });
});

afterAll(async () => {
  proxy?.set({ kind: 'pass' });
  try {
    await closeApps(apps);
  } finally {
    await proxy?.close();
    await deletePrefix(direct, prefix);
    direct.disconnect();
    await (await testRedis()).stop();
    console.log(`[proxy] measured maxima (slowest caller of ${APPS} x ${CALLERS}):\n${measured.join('\n')}`);
  }
});

let keys = 0;
const freshKey = (label: string) => `${label}-${++keys}`;

describe.each(FAULTS)('through the proxy: $name', (fault) => {
  it.each(VARIANTS)('$name: every call answers within the bound; no call fails', async (variant) => {
    proxy.set({ kind: 'pass' });
    await allReady(apps);
    const key = freshKey('herd');
    if (variant.seedStale) {
      const seeder = createRedisCache({ client: direct, prefix });
      await setValue(seeder, key, 'stale-seed', { ttl: SEED_TTL, staleWhileRevalidate: 60_000 });
      // The scenario: the seed's freshness must have lapsed, so the herd finds it stale.
      await sleep(SEED_TTL + 4);
    }
    proxy.set(fault.mode);
    const sum = totals(
      await herd(apps, { key, callers: CALLERS, fillMs: FILL_MS, options: variant.options }),
    );
    proxy.set({ kind: 'pass' });
    const limit = bound(fault, variant);
    measured.push(
      `  ${fault.name} / ${variant.name}: max ${sum.maxMs} ms (bound ${limit.ms} = ${limit.formula}), ${sum.fills} fill(s), backend errors: ${sum.backendErrors.join(' ') || 'none'}`,
    );
    expect(sum.errors).toEqual([]);
    expect(sum.answered).toBe(APPS * CALLERS);
    expect(sum.maxMs).toBeLessThanOrEqual(limit.ms);
    expect(sum.inFlight).toBe(0);
    if (variant.seedStale && fault.usable) {
      // Served stale at once; one background refresh fleet-wide.
      expect(sum.values).toEqual([JSON.stringify('stale-seed')]);
      expect(sum.fills).toBe(1);
    } else if (variant.lock && fault.usable) {
      expect(sum.fills).toBe(1);
    } else {
      // In-process single-flight holds whatever Redis does: at most one fill per process.
      expect(sum.fills).toBeGreaterThanOrEqual(1);
      expect(sum.fills).toBeLessThanOrEqual(APPS);
    }
    if (!fault.usable) expect(sum.backendErrors.length).toBeGreaterThan(0);
  });

  it('after healing, protection resumes: a herd on an expired key makes 1 fill fleet-wide', async () => {
    proxy.set(fault.mode);
    // Let the fault bite the idle connections too, then heal.
    await herd(apps, { key: freshKey('during'), callers: 5, fillMs: 10, options: { ttl: 60_000 } });
    proxy.set({ kind: 'pass' });
    await allReady(apps);
    const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: LOCK_WAIT_TIMEOUT };
    const sum = totals(await herd(apps, { key: freshKey('healed'), callers: CALLERS, fillMs: 300, options }));
    expect(sum.errors).toEqual([]);
    expect(sum.answered).toBe(APPS * CALLERS);
    expect(sum.fills).toBe(1);
  });
});
