// HTTP integration tests against the demo running as a real process (memory cache, SQLite).
import { STAT_NAMES } from '@stampede/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, runToExit, SEED_ROWS, startDemo } from './app-process.mjs';

/** @type {import('./app-process.mjs').DemoProcess} */
let demo;

beforeAll(async () => {
  demo = await startDemo({ DB_LATENCY_MS: '100', DB_POOL: '25' });
});

afterAll(async () => {
  const { code } = await demo.stop();
  expect(code).toBe(0);
  expect(demo.output()).toContain('SIGTERM: shutting down');
  expect(demo.output()).toContain('stopped');
});

describe('the demo over HTTP', () => {
  it('seeds the database on first start and logs the progress and the URL', () => {
    expect(demo.output()).toContain(
      `seeded ${SEED_ROWS.toLocaleString('en-US')} / ${SEED_ROWS.toLocaleString('en-US')}`,
    );
    expect(demo.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  // Runs before any count is served (the tests in this file share one process, in order).
  it('/actuator/metrics carries requests.lastServed as null until the protected path has answered', async () => {
    const before = await json(`${demo.url}/actuator/metrics`);
    expect(before.requests).toEqual({ protected: 0, unprotected: 0, steady: 0, lastServed: null });
    await json(`${demo.url}/api/bookmarks/count?protect=0`);
    expect((await json(`${demo.url}/actuator/metrics`)).requests.lastServed).toBeNull();
  });

  it('counts the bookmarks, protected and unprotected', async () => {
    expect(await json(`${demo.url}/api/bookmarks/count`)).toMatchObject({ count: SEED_ROWS, protect: true });
    expect(await json(`${demo.url}/api/bookmarks/count?protect=0`)).toMatchObject({
      count: SEED_ROWS,
      protect: false,
    });
  });

  it('a 500-request herd after POST /api/invalidate makes 1 fill and 1 database query', async () => {
    await json(`${demo.url}/api/invalidate`, { method: 'POST' });
    const before = await json(`${demo.url}/actuator/metrics`);
    const counts = await Promise.all(
      Array.from({ length: 500 }, () => json(`${demo.url}/api/bookmarks/count`).then((body) => body.count)),
    );
    const after = await json(`${demo.url}/actuator/metrics`);
    expect(new Set(counts)).toEqual(new Set([SEED_ROWS]));
    expect(after.cache.fills - before.cache.fills).toBe(1);
    expect(after.db.queries - before.db.queries).toBe(1);
    const served = ['hits', 'misses'].map((name) => after.cache[name] - before.cache[name]);
    expect(served[0] + served[1]).toBe(500);
  });

  it('POST /api/herd with protection: 1 fill, 1 query, everyone else coalesced or hit', async () => {
    const result = await json(`${demo.url}/api/herd?n=500&protect=1`, { method: 'POST' });
    expect(result).toMatchObject({ n: 500, protect: true, queries: 1, fills: 1, errors: 0 });
    expect(result.coalescedWaits + result.hits).toBe(499);
    expect(result.ms).toBeGreaterThan(0);
  });

  it('POST /api/herd without protection: the herd reaches the database many times', async () => {
    const result = await json(`${demo.url}/api/herd?n=500&protect=0`, { method: 'POST' });
    expect(result).toMatchObject({ n: 500, protect: false, fills: 0, errors: 0 });
    expect(result.queries).toBeGreaterThan(1);
  });

  it('refuses a herd that is too large or badly asked', async () => {
    for (const query of ['n=0', 'n=2001', 'n=abc', 'n=5&protect=2', 'n=5&failsafe=yes']) {
      const response = await fetch(`${demo.url}/api/herd?${query}`, { method: 'POST' });
      expect(response.status, query).toBe(400);
      expect((await response.json()).error).toBeTypeOf('string');
    }
  });

  it('refuses bad invalidate and outage parameters, naming the parameter', async () => {
    for (const [query, name] of [
      ['expire=2', 'expire'],
      ['expire=yes', 'expire'],
      ['tag=true', 'tag'],
      ['tag=2&steady=plain', 'tag'],
      ['scope=everywhere', 'scope'],
      ['scope=LOCAL&expire=1', 'scope'],
      ['steady=nope', 'steady'],
      ['tag=1&expire=1', 'tag'],
      ['tag=1&steady=plain', 'tag'],
    ]) {
      const response = await fetch(`${demo.url}/api/invalidate?${query}`, { method: 'POST' });
      expect(response.status, query).toBe(400);
      expect((await response.json()).error, query).toMatch(new RegExp(`^${name}\\b`));
    }
    const outage = await fetch(`${demo.url}/api/outage?mode=off&scope=all`, { method: 'POST' });
    expect(outage.status).toBe(400);
    expect((await outage.json()).error).toMatch(/^scope must be local/);
    // The accepted values still work.
    for (const query of ['', 'expire=0', 'expire=1', 'tag=1', 'tag=0&steady=plain', 'scope=local&expire=1']) {
      const response = await fetch(`${demo.url}/api/invalidate?${query}`, { method: 'POST' });
      expect(response.status, query).toBe(200);
    }
  });

  it('/actuator/metrics: core stats under "cache", queries under "db", the replica id', async () => {
    const metrics = await json(`${demo.url}/actuator/metrics`);
    expect(metrics.replica).toBe(0);
    expect(Object.keys(metrics.cache).sort()).toEqual([...STAT_NAMES].sort());
    for (const name of STAT_NAMES) expect(metrics.cache[name], name).toBeTypeOf('number');
    expect(metrics.cache.fills).toBeGreaterThanOrEqual(2);
    expect(metrics.db.queries).toBeGreaterThan(metrics.cache.fills);
    expect(metrics.caches.memory.fills).toBe(metrics.cache.fills);
  });

  it('/actuator/prometheus: stampede metrics in Prometheus text, no cache key in it', async () => {
    const response = await fetch(`${demo.url}/actuator/prometheus`);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(text).toMatch(/^stampede_fills_total\{cache="memory"\} \d+$/m);
    expect(text).toContain('# TYPE stampede_coalesced_waits_total counter');
    expect(text).toContain('stampede_fill_duration_seconds_bucket');
    expect(text).toMatch(/^demo_db_queries_total \d+$/m);
    expect(text).not.toContain('bookmark');
  });

  it('serves the page with its controls, and nothing from another origin', async () => {
    const response = await fetch(`${demo.url}/`);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await response.text();
    for (const id of [
      'herd-unprotected',
      'herd-protected',
      'result-protected-queries',
      'counter-fills',
      'chart',
      'failsafe',
      'outage-error',
      'outage-stall',
      'update',
      'steady-plain',
      'steady-swr',
      'steady-early',
      'steady-chart',
    ]) {
      expect(html).toContain(`data-testid="${id}"`);
    }
    expect(html).not.toMatch(/(src|href)="https?:/);
    expect(html).toContain('invalidateTag(cache, &#39;bookmarks&#39;)');
  });

  it('POST /api/update adds a bookmark, invalidates the tag, and the next reads serve the new count', async () => {
    expect(await json(`${demo.url}/api/bookmarks/count`)).toMatchObject({ count: SEED_ROWS });
    // Another key carrying the tag, cached for 2 s (the update takes well under that).
    expect(await json(`${demo.url}/api/bookmarks/count?steady=plain`)).toMatchObject({ count: SEED_ROWS });
    const tagInvalidations = (await json(`${demo.url}/actuator/metrics`)).cache.tagInvalidations;
    const result = await json(`${demo.url}/api/update`, { method: 'POST' });
    expect(result).toMatchObject({ count: SEED_ROWS + 1, allServeNewCount: true });
    expect(result.replicas).toEqual([expect.objectContaining({ replica: 0, count: SEED_ROWS + 1 })]);
    expect(await json(`${demo.url}/api/bookmarks/count`)).toMatchObject({ count: SEED_ROWS + 1 });
    expect(await json(`${demo.url}/api/bookmarks/count?protect=0`)).toMatchObject({ count: SEED_ROWS + 1 });
    expect(await json(`${demo.url}/api/bookmarks/count?steady=plain`)).toMatchObject({
      count: SEED_ROWS + 1,
    });
    const metrics = await json(`${demo.url}/actuator/metrics`);
    expect(metrics.cache.tagInvalidations - tagInvalidations).toBe(1);
    expect(metrics.db).toMatchObject({ writes: 1, rows: SEED_ROWS + 1 });
    expect(metrics.requests.lastServed).toBe(SEED_ROWS + 1);
  });
});

describe('start-up failures', () => {
  it('exits non-zero with the URL (password hidden) when Redis is unreachable', async () => {
    const { code, output } = await runToExit({ CACHE: 'redis', REDIS_URL: 'redis://:hunter2@127.0.0.1:1' });
    expect(code).toBe(1);
    expect(output).toContain('cannot reach Redis at redis://:***@127.0.0.1:1');
    expect(output).not.toContain('hunter2');
  });

  it('in replica mode, fails before starting any replica when Redis is unreachable', async () => {
    const { code, output } = await runToExit({
      REPLICAS: '2',
      CACHE: 'redis',
      REDIS_URL: 'redis://user:hunter2@127.0.0.1:1/0',
    });
    expect(code).toBe(1);
    expect(output).toContain('cannot reach Redis at redis://user:***@127.0.0.1:1/0');
    expect(output).not.toContain('hunter2');
    expect(output).not.toContain('[replica 1]');
  });

  it('says which setting is wrong', async () => {
    const { code, output } = await runToExit({ CACHE_TTL: 'soon' });
    expect(code).toBe(1);
    expect(output).toMatch(/CACHE_TTL must look like/);
    const zero = await runToExit({ LOCAL_TTL: '0' });
    expect(zero.code).toBe(1);
    expect(zero.output).toMatch(/LOCAL_TTL must be more than 0; got '0ms'/);
  });

  it('checks LOCK in every mode, as LOCAL_TTL: a bad value exits 1, a good one is ignored without Redis', async () => {
    for (const env of [{ LOCK: 'yes' }, { LOCK: 'yes', REPLICAS: '2' }, { LOCK: '2', CACHE: 'memory' }]) {
      const { code, output } = await runToExit(env);
      expect(code, JSON.stringify(env)).toBe(1);
      expect(output).toMatch(new RegExp(`LOCK must be 0 or 1; got '${env.LOCK}'`));
    }
    const ignored = await startDemo({ LOCK: '0', DB_LATENCY_MS: '0' });
    try {
      expect(await json(`${ignored.url}/api/bookmarks/count?lock=1`)).toMatchObject({
        count: SEED_ROWS,
        lock: false,
      });
    } finally {
      expect((await ignored.stop()).code).toBe(0);
    }
  });
});

/** Past the demo's CACHE_TTL of 300 ms, well inside its 1 m grace. */
const PAST_TTL_MS = 500;

describe('TTL and stale-while-revalidate from the environment', () => {
  it('serves the stale count at once past CACHE_TTL and refreshes it in the background', async () => {
    const demo = await startDemo({ CACHE_TTL: '300ms', CACHE_SWR: '1m', DB_LATENCY_MS: '0' });
    try {
      expect(demo.output()).toContain('TTL 300ms, SWR 1m');
      await json(`${demo.url}/api/bookmarks/count`);
      // The scenario: the entry's 300 ms TTL must lapse (the SWR grace keeps it servable).
      await new Promise((resolve) => setTimeout(resolve, PAST_TTL_MS));
      expect(await json(`${demo.url}/api/bookmarks/count`)).toMatchObject({ count: SEED_ROWS });
      await expect
        .poll(async () => (await json(`${demo.url}/actuator/metrics`)).db.queries, { timeout: 5_000 })
        .toBe(2);
      const { cache } = await json(`${demo.url}/actuator/metrics`);
      expect(cache).toMatchObject({ misses: 1, staleHits: 1, backgroundRefreshes: 1, fills: 2 });
    } finally {
      expect((await demo.stop()).code).toBe(0);
    }
  });
});
