import { readFileSync } from 'node:fs';
import {
  type Cache,
  configure,
  createTieredCache,
  getOrCompute,
  getOrComputeWith,
  invalidateTags,
  resetStats,
  STAT_NAMES,
  setValue,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { Gauge, Registry, register } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isMetricAlreadyRegisteredError,
  MetricAlreadyRegisteredError,
  registerStampedeMetrics,
  type StampedeMetrics,
} from '../src/index.js';
import { deferred, sample } from './helpers.js';

const handles: StampedeMetrics[] = [];
function track(handle: StampedeMetrics): StampedeMetrics {
  handles.push(handle);
  return handle;
}

beforeEach(() => {
  resetStats();
});

afterEach(() => {
  for (const handle of handles.splice(0)) handle.unregister();
});

async function herd(cache: Cache, key: string, callers: number): Promise<void> {
  const gate = deferred<void>();
  const calls = Array.from({ length: callers }, () =>
    getOrCompute(cache, key, '1m', async () => {
      await gate.promise;
      return 'value';
    }),
  );
  gate.resolve();
  await Promise.all(calls);
}

describe('registerStampedeMetrics', () => {
  it('records 1 fill and 99 coalesced waits for 100 concurrent callers, by cache name only', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'herd' });
    const key = 'user:KEY-NEVER-IN-OUTPUT-9f2c';

    await herd(cache, key, 100);
    await getOrCompute(cache, key, '1m', () => 'unused');
    const text = await registry.metrics();

    expect(sample(text, 'stampede_fills_total', { cache: 'herd' })).toBe(1);
    expect(sample(text, 'stampede_coalesced_waits_total', { cache: 'herd' })).toBe(99);
    expect(sample(text, 'stampede_misses_total', { cache: 'herd' })).toBe(100);
    expect(sample(text, 'stampede_hits_total', { cache: 'herd' })).toBe(1);
    expect(sample(text, 'stampede_stale_hits_total', { cache: 'herd' })).toBe(0);
    expect(sample(text, 'stampede_lock_wait_timeouts_total', { cache: 'herd' })).toBe(0);
    expect(sample(text, 'stampede_fill_duration_seconds_count', { cache: 'herd', outcome: 'ok' })).toBe(1);
    expect(
      sample(text, 'stampede_fill_duration_seconds_bucket', { cache: 'herd', outcome: 'ok', le: '+Inf' }),
    ).toBe(1);
    expect(text).toContain('stampede_fill_duration_seconds_bucket{le="0.005",cache="herd",outcome="ok"}');
    expect(text).toContain('# TYPE stampede_lock_wait_duration_seconds histogram');
    expect(text).not.toContain('KEY-NEVER-IN-OUTPUT');
  });

  it('registers one counter per core stat plus the two histograms', () => {
    const registry = new Registry();
    const handle = track(registerStampedeMetrics({ registry }));

    expect(handle.registry).toBe(registry);
    expect(handle.metricNames).toContain('stampede_hits_total');
    expect(handle.metricNames).toContain('stampede_stale_hits_total');
    expect(handle.metricNames).toContain('stampede_coalesced_waits_total');
    expect(handle.metricNames).toContain('stampede_lock_wait_timeouts_total');
    expect(handle.metricNames).toContain('stampede_background_refreshes_skipped_total');
    expect(handle.metricNames).toContain('stampede_fail_safe_activations_total');
    expect(handle.metricNames).toContain('stampede_soft_timeouts_total');
    expect(handle.metricNames).toHaveLength(STAT_NAMES.length + 2);
    expect(registry.getMetricsAsArray().map((metric) => metric.name)).toEqual(handle.metricNames);
  });

  it("lists every metric in the README's Metrics table, and no other", () => {
    const handle = track(registerStampedeMetrics({ registry: new Registry() }));
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const table = readme.slice(readme.indexOf('## Metrics'), readme.indexOf('## Grafana dashboard'));
    const listed = [...table.matchAll(/^\| `(stampede_[a-z0-9_]+)`/gm)].map((match) => match[1]);
    expect([...listed].sort()).toEqual([...handle.metricNames].sort());
  });

  it('reads the counters at scrape time without counting twice', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'scrapes' });

    await getOrCompute(cache, 'k:SCRAPE-KEY-1b7e', '1m', () => 1);
    await getOrCompute(cache, 'k:SCRAPE-KEY-1b7e', '1m', () => 1);
    const first = await registry.metrics();
    const second = await registry.metrics();
    await getOrCompute(cache, 'k:SCRAPE-KEY-1b7e', '1m', () => 1);
    const third = await registry.metrics();

    expect(sample(first, 'stampede_hits_total', { cache: 'scrapes' })).toBe(1);
    expect(sample(second, 'stampede_hits_total', { cache: 'scrapes' })).toBe(1);
    expect(sample(third, 'stampede_hits_total', { cache: 'scrapes' })).toBe(2);
    expect(sample(third, 'stampede_fills_total', { cache: 'scrapes' })).toBe(1);
    expect(third).not.toContain('SCRAPE-KEY');
  });

  it('reads 0 for a counter another (older) copy of the core does not keep, as stats() does', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    // What an older copy of the core in the same process leaves in the shared state: counters made
    // before `l1Hits` and the later ones existed.
    const shared = (globalThis as Record<symbol, { counters: Map<string, Record<string, number>> }>)[
      Symbol.for('@stampede/core/shared/v1')
    ];
    shared?.counters.set('old-copy', { hits: 3, misses: 1 });
    try {
      const text = await registry.metrics();
      expect(sample(text, 'stampede_hits_total', { cache: 'old-copy' })).toBe(3);
      expect(sample(text, 'stampede_l1_hits_total', { cache: 'old-copy' })).toBe(0);
      expect(sample(text, 'stampede_tag_invalidations_total', { cache: 'old-copy' })).toBe(0);
    } finally {
      shared?.counters.delete('old-copy');
    }
  });

  it('counts early refreshes as stampede_early_refreshes_total', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'early' });
    const options = { ttl: 60_000, earlyRefresh: true } as const;
    // An entry whose fill took 100 s, 5 s from expiry: with random() at 0.5 the head start is 69 s.
    const now = Date.now();
    const fresh = { createdAt: now, freshUntil: now + 5_000, staleUntil: now + 5_000 };
    cache.set('k', { value: 1, ...fresh, delta: 100_000 }, { ttl: 60_000 });
    configure({ random: () => 0.5 });
    try {
      expect(await getOrComputeWith(cache, 'k', options, () => 2)).toBe(1);
    } finally {
      configure({ random: Math.random });
    }
    const text = await registry.metrics();
    expect(sample(text, 'stampede_early_refreshes_total', { cache: 'early' })).toBe(1);
    expect(sample(text, 'stampede_early_refreshes_skipped_total', { cache: 'early' })).toBe(0);
    expect(sample(text, 'stampede_background_refreshes_total', { cache: 'early' })).toBe(0);
  });

  it('labels a failing fill outcome="error" and counts the failure', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'failing' });

    await expect(
      getOrCompute(cache, 'k:FAILING-KEY-4d1a', '1m', () => {
        throw new Error('database down');
      }),
    ).rejects.toThrow('database down');
    const text = await registry.metrics();

    expect(sample(text, 'stampede_fill_failures_total', { cache: 'failing' })).toBe(1);
    expect(sample(text, 'stampede_fill_duration_seconds_count', { cache: 'failing', outcome: 'error' })).toBe(
      1,
    );
    expect(
      sample(text, 'stampede_fill_duration_seconds_count', { cache: 'failing', outcome: 'ok' }),
    ).toBeUndefined();
    expect(text).not.toContain('FAILING-KEY');
  });

  it('labels a fill that outlives fillTimeout outcome="timeout"', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'slow' });

    await expect(
      getOrComputeWith(
        cache,
        'k:SLOW-KEY-88e0',
        { ttl: '1m', fillTimeout: '10ms' },
        ({ signal }) =>
          new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      ),
    ).rejects.toMatchObject({ kind: 'timeout' });
    const text = await registry.metrics();

    expect(sample(text, 'stampede_fill_timeouts_total', { cache: 'slow' })).toBe(1);
    expect(sample(text, 'stampede_fill_duration_seconds_count', { cache: 'slow', outcome: 'timeout' })).toBe(
      1,
    );
    expect(text).not.toContain('SLOW-KEY');
  });

  it('counts fail-safe activations and soft timeouts (stampede_fail_safe_activations_total, stampede_soft_timeouts_total)', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'outage' });
    const options = { ttl: '20ms', failSafe: true, softTimeout: '10ms' } as const;
    expect(await getOrComputeWith(cache, 'k', options, () => 'last good')).toBe('last good');
    await new Promise((resolve) => setTimeout(resolve, 40));
    // The database is down: the caller gets the last good value, re-armed for the throttle (30 s).
    const down = await getOrComputeWith(cache, 'k', options, () => {
      throw new Error('database down');
    });
    expect(down).toBe('last good');
    // A slow database on another key: after softTimeout the caller has the last value; the fill lands later.
    await getOrComputeWith(cache, 'slow', options, () => 'old');
    await new Promise((resolve) => setTimeout(resolve, 40));
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'slow', options, () => gate.promise)).toBe('old');
    gate.resolve('new');
    const text = await registry.metrics();

    expect(sample(text, 'stampede_fail_safe_activations_total', { cache: 'outage' })).toBe(1);
    expect(sample(text, 'stampede_soft_timeouts_total', { cache: 'outage' })).toBe(1);
    expect(sample(text, 'stampede_fill_failures_total', { cache: 'outage' })).toBe(1);
    expect(text).toContain('# HELP stampede_fail_safe_activations_total Failed or timed-out fills');
  });

  it('observes lock waits by outcome: another replica filled, or the wait timed out', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const memory = createMemoryCache({ name: 'locked' });
    // Another replica always holds the lock; its value shows up in the shared store.
    const cache: Cache = {
      name: 'locked',
      get: (key) => memory.get(key),
      set: (key, entry, options) => memory.set(key, entry, options),
      delete: (key) => memory.delete(key),
      tryAcquireFillLock: () => undefined,
    };
    const options = {
      ttl: '1m',
      distributedFillLock: true,
      lockPollInterval: '5ms',
      lockWaitTimeout: '2s',
    } as const;

    const waiting = getOrComputeWith(cache, 'k:LOCK-HIT-KEY-0c4f', options, () => 'local');
    setTimeout(() => {
      const now = Date.now();
      memory.set(
        'k:LOCK-HIT-KEY-0c4f',
        { value: 'remote', createdAt: now, freshUntil: now + 60_000, staleUntil: now + 60_000 },
        { ttl: 60_000 },
      );
    }, 20);
    await expect(waiting).resolves.toBe('remote');
    await expect(
      getOrComputeWith(
        cache,
        'k:LOCK-TIMEOUT-KEY-5a93',
        { ...options, lockWaitTimeout: '20ms' },
        () => 'local',
      ),
    ).resolves.toBe('local');
    const text = await registry.metrics();

    expect(sample(text, 'stampede_lock_contended_total', { cache: 'locked' })).toBe(2);
    expect(sample(text, 'stampede_lock_wait_hits_total', { cache: 'locked' })).toBe(1);
    expect(sample(text, 'stampede_lock_wait_timeouts_total', { cache: 'locked' })).toBe(1);
    expect(
      sample(text, 'stampede_lock_wait_duration_seconds_count', { cache: 'locked', outcome: 'hit' }),
    ).toBe(1);
    expect(
      sample(text, 'stampede_lock_wait_duration_seconds_count', { cache: 'locked', outcome: 'timeout' }),
    ).toBe(1);
    expect(text).not.toContain('LOCK-HIT-KEY');
    expect(text).not.toContain('LOCK-TIMEOUT-KEY');
  });

  it("counts a wait that ended on a backend fault and observes it with outcome 'error'", async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const memory = createMemoryCache({ name: 'faulty' });
    // Another replica holds the lock; the second attempt, during the wait, meets a backend fault.
    let attempts = 0;
    const cache: Cache = {
      name: 'faulty',
      get: (key) => memory.get(key),
      set: (key, entry, options) => memory.set(key, entry, options),
      delete: (key) => memory.delete(key),
      tryAcquireFillLock: () => {
        attempts++;
        if (attempts === 1) return undefined;
        throw new Error('connection reset');
      },
    };
    const options = { ttl: '1m', distributedFillLock: true, lockPollInterval: '5ms' } as const;
    await expect(getOrComputeWith(cache, 'k:LOCK-ERROR-KEY-7d21', options, () => 'local')).resolves.toBe(
      'local',
    );
    const text = await registry.metrics();

    expect(attempts).toBe(2);
    expect(sample(text, 'stampede_lock_wait_errors_total', { cache: 'faulty' })).toBe(1);
    expect(sample(text, 'stampede_lock_wait_timeouts_total', { cache: 'faulty' })).toBe(0);
    expect(sample(text, 'stampede_backend_errors_total', { cache: 'faulty' })).toBe(1);
    expect(
      sample(text, 'stampede_lock_wait_duration_seconds_count', { cache: 'faulty', outcome: 'error' }),
    ).toBe(1);
    expect(text).not.toContain('LOCK-ERROR-KEY');
  });

  it('exports check failures and tag invalidations as counters, without tags or keys as labels', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const cache = createMemoryCache({ name: 'checked' });
    await setValue(cache, 'k:CHECK-KEY-5e1a', { old: 'shape' }, { tags: ['TAG-LABEL-9c2f'] });
    const isNumber = (value: unknown) => typeof value === 'number';
    await expect(
      getOrComputeWith(cache, 'k:CHECK-KEY-5e1a', { checkValue: isNumber }, () => 7),
    ).resolves.toBe(7);
    await invalidateTags(cache, ['TAG-LABEL-9c2f', 'other']);
    const text = await registry.metrics();
    expect(sample(text, 'stampede_check_value_failures_total', { cache: 'checked' })).toBe(1);
    expect(sample(text, 'stampede_tag_invalidations_total', { cache: 'checked' })).toBe(2);
    expect(text).not.toContain('CHECK-KEY');
    expect(text).not.toContain('TAG-LABEL');
  });

  it("exports a tiered cache's L1 and L2 hits under its name", async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    // Two memory caches stand for L1 and L2 (no bus: nothing to evict or recover).
    const remote = createMemoryCache({ name: 'tiered-remote' });
    const first = createTieredCache({ local: createMemoryCache(), remote, name: 'tiered-a' });
    const second = createTieredCache({ local: createMemoryCache(), remote, name: 'tiered-b' });
    await getOrCompute(first, 'k:TIERED-KEY-91c4', '1m', () => 'v');
    await new Promise((resolve) => setTimeout(resolve, 0));
    await getOrCompute(second, 'k:TIERED-KEY-91c4', '1m', () => 'never');
    await getOrCompute(second, 'k:TIERED-KEY-91c4', '1m', () => 'never');
    const text = await registry.metrics();

    expect(sample(text, 'stampede_l2_hits_total', { cache: 'tiered-b' })).toBe(1);
    expect(sample(text, 'stampede_l1_hits_total', { cache: 'tiered-b' })).toBe(1);
    expect(sample(text, 'stampede_hits_total', { cache: 'tiered-b' })).toBe(2);
    expect(sample(text, 'stampede_bus_evictions_total', { cache: 'tiered-b' })).toBe(0);
    expect(sample(text, 'stampede_bus_recoveries_total', { cache: 'tiered-b' })).toBe(0);
    expect(text).not.toContain('TIERED-KEY');
  });

  it("defaults to prom-client's global registry", async () => {
    const handle = track(registerStampedeMetrics());
    const cache = createMemoryCache({ name: 'global' });

    await herd(cache, 'k:GLOBAL-KEY-3e6b', 10);
    const text = await register.metrics();

    expect(handle.registry).toBe(register);
    expect(sample(text, 'stampede_fills_total', { cache: 'global' })).toBe(1);
    expect(sample(text, 'stampede_coalesced_waits_total', { cache: 'global' })).toBe(9);
    expect(text).not.toContain('GLOBAL-KEY');
  });

  it('applies a custom prefix', async () => {
    const registry = new Registry();
    const handle = track(registerStampedeMetrics({ registry, prefix: 'app_cache_' }));
    const cache = createMemoryCache({ name: 'prefixed' });

    await getOrCompute(cache, 'k:PREFIX-KEY-77aa', '1m', () => 1);
    const text = await registry.metrics();

    expect(handle.metricNames).toContain('app_cache_fill_duration_seconds');
    expect(sample(text, 'app_cache_fills_total', { cache: 'prefixed' })).toBe(1);
    expect(text).not.toContain('stampede_');
  });

  it('unregister removes every metric and stops listening', async () => {
    const registry = new Registry();
    registry.registerMetric(new Gauge({ name: 'unrelated', help: 'not ours', registers: [] }));
    const handle = registerStampedeMetrics({ registry });
    const fillHistogram = registry.getSingleMetric('stampede_fill_duration_seconds');
    const cache = createMemoryCache({ name: 'unregistered' });

    handle.unregister();
    handle.unregister();
    await getOrCompute(cache, 'k:UNREG-KEY-2f08', '1m', () => 1);

    expect(registry.getMetricsAsArray().map((metric) => metric.name)).toEqual(['unrelated']);
    expect(await registry.metrics()).not.toContain('stampede_');
    // The detached histogram saw nothing: the event listener is gone.
    expect((await fillHistogram?.get())?.values).toEqual([]);
    // And the names are free again.
    const again = track(registerStampedeMetrics({ registry }));
    expect(again.metricNames).toHaveLength(STAT_NAMES.length + 2);
  });

  it('throws MetricAlreadyRegisteredError naming the metric when registered twice, and registers nothing', () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry }));
    const before = registry.getMetricsAsArray().length;

    let caught: unknown;
    try {
      registerStampedeMetrics({ registry });
    } catch (error) {
      caught = error;
    }

    expect(caught).toBeInstanceOf(MetricAlreadyRegisteredError);
    expect(isMetricAlreadyRegisteredError(caught)).toBe(true);
    expect(caught).toMatchObject({
      code: 'E_STAMPEDE_METRIC_ALREADY_REGISTERED',
      metricName: 'stampede_hits_total',
    });
    expect((caught as Error).message).toContain("'stampede_hits_total' is already registered");
    expect(registry.getMetricsAsArray()).toHaveLength(before);
  });

  it('refuses a partial overlap before registering anything', () => {
    const histogramOnly = new Registry();
    const first = registerStampedeMetrics({ registry: histogramOnly });
    for (const name of first.metricNames) {
      if (name !== 'stampede_lock_wait_duration_seconds') histogramOnly.removeSingleMetric(name);
    }

    expect(() => registerStampedeMetrics({ registry: histogramOnly })).toThrow(
      /'stampede_lock_wait_duration_seconds' is already registered/,
    );
    expect(histogramOnly.getMetricsAsArray()).toHaveLength(1);
    first.unregister();
    expect(histogramOnly.getMetricsAsArray()).toHaveLength(0);
  });

  it('allows two registries side by side', async () => {
    const a = new Registry();
    const b = new Registry();
    track(registerStampedeMetrics({ registry: a }));
    track(registerStampedeMetrics({ registry: b }));
    const cache = createMemoryCache({ name: 'twice' });

    await getOrCompute(cache, 'k:TWICE-KEY-6c21', '1m', () => 1);

    for (const text of [await a.metrics(), await b.metrics()]) {
      expect(sample(text, 'stampede_fills_total', { cache: 'twice' })).toBe(1);
      expect(sample(text, 'stampede_fill_duration_seconds_count', { cache: 'twice', outcome: 'ok' })).toBe(1);
    }
  });

  it('rejects an invalid prefix or bucket list with a TypeError', () => {
    const registry = new Registry();

    expect(() => registerStampedeMetrics({ registry, prefix: 'has space' })).toThrow(TypeError);
    expect(() => registerStampedeMetrics({ registry, prefix: 42 as unknown as string })).toThrow(TypeError);
    expect(() => registerStampedeMetrics({ registry, fillDurationBuckets: [] })).toThrow(TypeError);
    expect(() => registerStampedeMetrics({ registry, lockWaitDurationBuckets: [1, 0.5] })).toThrow(TypeError);
    // A misspelt option would otherwise be ignored: the default buckets, silently.
    expect(() => registerStampedeMetrics({ registry, fillDurationBucket: [1] } as never)).toThrow(
      new TypeError("options.fillDurationBucket is not an option (did you mean 'fillDurationBuckets'?)"),
    );
    expect(() => registerStampedeMetrics(null as never)).toThrow('options must be an object; got null');
    // An array is no options object: it would register on prom-client's global registry.
    expect(() => registerStampedeMetrics([] as never)).toThrow('options must be an object; got array');
    for (const bad of [null, {}, 'default']) {
      expect(() => registerStampedeMetrics({ registry: bad as never })).toThrow(
        /^options\.registry must be a prom-client Registry; got /,
      );
    }
    expect(registry.getMetricsAsArray()).toHaveLength(0);
  });

  it('uses the given buckets', async () => {
    const registry = new Registry();
    track(registerStampedeMetrics({ registry, fillDurationBuckets: [0.5, 2] }));
    const cache = createMemoryCache({ name: 'buckets' });

    await getOrCompute(cache, 'k:BUCKET-KEY-90d1', '1m', () => 1);
    const text = await registry.metrics();

    expect(
      sample(text, 'stampede_fill_duration_seconds_bucket', { cache: 'buckets', outcome: 'ok', le: '0.5' }),
    ).toBe(1);
    expect(text).not.toContain('le="0.005",cache="buckets"');
  });
});
