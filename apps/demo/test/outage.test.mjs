// The "database outage" switch over HTTP (memory cache, SQLite): without fail-safe a herd gets
// errors; with it, the last good count, and the database tried at most once per throttle.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { json, SEED_ROWS, startDemo } from './app-process.mjs';

/** @type {import('./app-process.mjs').DemoProcess} */
let demo;

beforeAll(async () => {
  demo = await startDemo({ DB_LATENCY_MS: '50' });
});

afterAll(async () => {
  expect((await demo.stop()).code).toBe(0);
});

afterEach(async () => {
  await json(`${demo.url}/api/outage?mode=off`, { method: 'POST' });
});

const post = (/** @type {string} */ path) => json(`${demo.url}${path}`, { method: 'POST' });

describe('database outage', () => {
  it('switches every query to failing, and reports it in /actuator/metrics', async () => {
    expect(await post('/api/outage?mode=error')).toMatchObject({ outage: 'error' });
    expect((await json(`${demo.url}/actuator/metrics`)).db.outage).toBe('error');
    const response = await fetch(`${demo.url}/api/bookmarks/count?protect=0`);
    expect(response.status).toBe(500);
    expect((await response.json()).error).toMatch(/database unavailable/);
    expect((await json(`${demo.url}/actuator/metrics`)).db.failedQueries).toBe(1);
  });

  it('refuses an unknown mode', async () => {
    const response = await fetch(`${demo.url}/api/outage?mode=sometimes`, { method: 'POST' });
    expect(response.status).toBe(400);
    expect((await response.json()).error).toMatch(/mode must be one of off, error, stall/);
  });

  it('a herd without fail-safe gets errors; with it, the last good count, from 1 query', async () => {
    await post('/api/herd?n=100&protect=1'); // a good count in the cache
    await post('/api/outage?mode=error');

    const without = await post('/api/herd?n=200&protect=1&failsafe=0');
    expect(without).toMatchObject({ reset: 'expire', failSafe: false, errors: 200, failSafeActivations: 0 });
    expect(without.fillFailures).toBeGreaterThanOrEqual(1);

    const withFailSafe = await post('/api/herd?n=200&protect=1&failsafe=1');
    expect(withFailSafe).toMatchObject({
      reset: 'expire',
      failSafe: true,
      errors: 0,
      queries: 1,
      fills: 1,
      fillFailures: 1,
      failSafeActivations: 1,
    });
    // Re-armed for the throttle: the next requests are answered without touching the database.
    const before = (await json(`${demo.url}/actuator/metrics`)).db.queries;
    for (let i = 0; i < 20; i++) {
      expect(await json(`${demo.url}/api/bookmarks/count?failsafe=1`)).toMatchObject({ count: SEED_ROWS });
    }
    expect((await json(`${demo.url}/actuator/metrics`)).db.queries).toBe(before);
  });

  it('a stalled database: with fail-safe the soft timeout answers long before the query gives up', async () => {
    await post('/api/herd?n=50&protect=1');
    await post('/api/outage?mode=stall');
    const failedBefore = (await json(`${demo.url}/actuator/metrics`)).db.failedQueries;
    const result = await post('/api/herd?n=200&protect=1&failsafe=1');
    expect(result).toMatchObject({ errors: 0, softTimeouts: 1, queries: 1 });
    // The stall lasts 5 s; the 250 ms soft timeout answers well before (generous for a shared machine).
    expect(result.ms).toBeLessThan(4_000);
    // Ending the outage lets the stalled query finish normally.
    await post('/api/outage?mode=off');
    await expect
      .poll(async () => (await json(`${demo.url}/actuator/metrics`)).db.inFlight, { timeout: 5_000 })
      .toBe(0);
    expect((await json(`${demo.url}/actuator/metrics`)).db.failedQueries).toBe(failedBefore);
  });

  it('steady load through an outage: fail-safe answers every request, the database is tried at most once per throttle', async () => {
    await post('/api/steady?variant=plain&rate=20&seconds=1'); // a good count for the steady key
    await post('/api/outage?mode=error');
    const withFailSafe = await post('/api/steady?variant=plain&rate=50&seconds=4&failsafe=1');
    expect(withFailSafe).toMatchObject({ n: 200, errors: 0 });
    // 4 s of load with a 5 s throttle: the warm-up read before the run re-arms the count, so at most
    // one more attempt falls inside the run.
    expect(withFailSafe.queries).toBeLessThanOrEqual(1);

    const without = await post('/api/steady?variant=plain&rate=50&seconds=2&failsafe=0');
    expect(without.errors).toBeGreaterThan(0);
    expect(without.queries).toBeGreaterThan(1);
  });

  it('fail-safe switched on during the outage still has the count to answer with, though the cache let it go', async () => {
    // Written without fail-safe, the steady key is kept only for its 2 s TTL.
    await post('/api/steady?variant=swr&rate=20&seconds=1');
    await new Promise((resolve) => setTimeout(resolve, 4_500)); // the scenario: past the 2 s TTL + 2 s grace
    await post('/api/outage?mode=error');
    const result = await post('/api/steady?variant=swr&rate=20&seconds=1&failsafe=1');
    expect(result).toMatchObject({ n: 20, errors: 0 });
  });
});
