import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type DbServer, startDbServer } from './db-server.js';
import { herd, NO_ANSWER } from './herd.js';
import { bundleExample } from './readme-example.js';
import { runtimeProblems, startWorker, type Worker } from './workerd.js';

// workerd cancels a request's work when the request has answered, unless `waitUntil` keeps it: a fill
// still running then never settles. Here no `waitUntil` is passed, and the fill (one query, 1.5 s)
// outlives the request that started it. Without a bound, every request that joined it, and every
// later request for the key, waited forever.

const FILL_MS = 1500;

// `?budget=ms`: this caller's own signal (the request answers 203 when it fires or the call fails).
const source = `
import { getOrComputeWith, inFlightCount } from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';

const cache = createMemoryCache({ max: 100 });
const query = async () => JSON.stringify(await (await fetch(__EDGE_TEST__.dbUrl + '/top-posts')).json());

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/inflight') return new Response(String(inFlightCount(cache)));
    const budget = url.searchParams.get('budget');
    const swr = url.searchParams.has('swr');
    const options = swr
      ? { ttl: 2000, staleWhileRevalidate: 2500 }
      : { ttl: '30s', ...(budget ? { signal: AbortSignal.timeout(Number(budget)) } : {}) };
    try {
      return new Response(await getOrComputeWith(cache, swr ? 'swr' : 'k', options, query));
    } catch (error) {
      return new Response(error.name + ' ' + (error.kind ?? '') + ': ' + error.message, { status: 203 });
    }
  },
};
`;

let db: DbServer;
let script: string;
let worker: Worker | undefined;

beforeAll(async () => {
  db = await startDbServer(FILL_MS);
  script = await bundleExample(source, 'workerd', { dbUrl: db.url, prefix: 'unused:' });
});

afterEach(async () => {
  await worker?.dispose();
  worker = undefined;
  db.reset();
});

afterAll(async () => {
  await db?.close();
});

/** One request, answered within `limit` ms or recorded as {@link NO_ANSWER}. */
async function one(w: Worker, path: string, limit: number): Promise<{ status: number; body: string }> {
  const result = await herd(1, () => w.fetch(path), limit);
  return { status: result.statuses[0] ?? NO_ANSWER, body: result.bodies[0] ?? '' };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The runtime's complaints other than the core's own warning about the missing waitUntil. */
function otherProblems(logs: readonly string[]): string[] {
  return runtimeProblems(logs).filter((line) => !line.includes("cancels a request's work"));
}

describe('workerd: a fill whose request ended without waitUntil does not hold its key', () => {
  it('the first caller leaves on its signal and its request ends: the joiner is answered, and a later request fills afresh', async () => {
    worker = await startWorker(script);
    const w = worker;
    const started = Date.now();
    const leader = one(w, '/?budget=200', 8000);
    await sleep(50);
    const joiner = one(w, '/', 8000);
    expect((await leader).status).toBe(203);
    const joined = await joiner;
    // Before: no answer at all. Now: given up once the fill's request has been silent for 2 s.
    expect(joined.status).toBe(203);
    expect(joined.body).toMatch(/CacheFillError timeout/);
    expect(Date.now() - started).toBeLessThan(4000);
    const later = await one(w, '/', 4000);
    expect(later.status).toBe(200);
    expect(later.body).toMatch(/query 2/);
    expect(await one(w, '/inflight', 2000)).toEqual({ status: 200, body: '0' });
    await w.quiet();
    expect(w.logs.join('\n')).toMatch(/workerd cancels a request's work when the request ends/);
    expect(otherProblems(w.logs)).toEqual([]);
  });

  it('a stale-while-revalidate refresh dies with the stale read that started it: a cold miss past staleUntil fills afresh', async () => {
    worker = await startWorker(script);
    const w = worker;
    // Fresh for 2 s, then stale for 2.5 s.
    expect((await one(w, '/?swr', 4000)).body).toMatch(/query 1/);
    await sleep(2600);
    // Within grace: the stale value at once, and a refresh that dies when this request ends.
    const stale = await one(w, '/?swr', 4000);
    expect(stale.body).toMatch(/query 1/);
    expect(db.queries).toBe(2);
    // Past staleUntil: a cold miss, with the dead refresh still registered.
    await sleep(2500);
    const cold = await one(w, '/?swr', 6000);
    expect(cold.status).toBe(200);
    expect(cold.body).toMatch(/query 3/);
    expect(await one(w, '/inflight', 2000)).toEqual({ status: 200, body: '0' });
    await w.quiet();
    expect(otherProblems(w.logs)).toEqual([]);
  });
});
