import { waitFor } from '@stampede/test-support';
import { upstashKeys } from '@stampede/upstash';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type DbServer, startDbServer } from './db-server.js';
import { ABORTED, herd, herdWithAbort } from './herd.js';
import { bundleExample, nodeBuiltinsIn, readmeBlock } from './readme-example.js';
import { type RestServer, startRestServer } from './rest-server.js';
import { runtimeProblems, startWorker, type Worker } from './workerd.js';

// packages/upstash/README.md's Cloudflare Workers example (ttl, SWR, distributedFillLock, waitUntil),
// bundled as a user would, in workerd against a local Upstash REST server over the test Redis.
const example = readmeBlock('packages/upstash/README.md', 'Cloudflare Workers:');

let db: DbServer;
let rest: RestServer;
const workers: Worker[] = [];

beforeAll(async () => {
  [db, rest] = await Promise.all([startDbServer(), startRestServer('edge-workerd')]);
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.dispose()));
  db.reset();
});

afterAll(async () => {
  await db?.close();
  await rest?.stop();
});

/** One isolate running the example, with a key prefix of its own unless `prefix` is given. */
async function isolate(prefix = rest.nextPrefix()): Promise<Worker> {
  const script = await bundleExample(example, 'workerd', { dbUrl: db.url, prefix });
  expect(nodeBuiltinsIn(script)).toEqual([]);
  const worker = await startWorker(script, {
    UPSTASH_REDIS_REST_URL: rest.server.url,
    UPSTASH_REDIS_REST_TOKEN: rest.server.token,
  });
  workers.push(worker);
  return worker;
}

async function problems(): Promise<string[]> {
  await Promise.all(workers.map((worker) => worker.quiet()));
  return workers.flatMap((worker) => runtimeProblems(worker.logs));
}

describe('upstash README Cloudflare Workers example in workerd', () => {
  it('8 concurrent requests on a cold key in one isolate: 8 x 200, one value, 1 fill, no runtime warning', async () => {
    const prefix = rest.nextPrefix();
    const worker = await isolate(prefix);
    const result = await herd(8, () => worker.fetch('/'));
    expect(result.statuses).toEqual(Array(8).fill(200));
    expect(new Set(result.bodies).size).toBe(1);
    expect(db.queries).toBe(1);
    // The write and the lock's release run after the responses, through the example's waitUntil.
    const keys = upstashKeys(prefix, 'top-posts');
    const redis = rest.client();
    await waitFor(
      async () => (await redis.exists(keys.value)) === 1 && (await redis.exists(keys.lock)) === 0,
      {
        message: 'the value written and the lock released after the responses',
      },
    );
    expect(await problems()).toEqual([]);
    console.log(`workerd upstash, one isolate: 8 requests in ${result.ms} ms, ${db.queries} fill`);
  });

  it('two isolates on one prefix, 8 concurrent requests split across them: 1 fill in total (the lock)', async () => {
    const prefix = rest.nextPrefix();
    const [a, b] = await Promise.all([isolate(prefix), isolate(prefix)]);
    const result = await herd(8, (index) => (index % 2 === 0 ? a : b).fetch('/'));
    expect(result.statuses).toEqual(Array(8).fill(200));
    expect(new Set(result.bodies).size).toBe(1);
    expect(db.queries).toBe(1);
    expect(await problems()).toEqual([]);
    console.log(`workerd upstash, two isolates: 8 requests in ${result.ms} ms, ${db.queries} fill`);
  });

  it.each([
    ['a joiner', 3, 40],
    ['the first request (whose fill it is)', 0, 60],
  ])('%s aborting mid-wait leaves the others their 200 and the one fill', async (who, index, after) => {
    const worker = await isolate();
    const result = await herdWithAbort(8, (init) => worker.fetch('/', init), index, after);
    expect(result.statuses[index]).toBe(ABORTED);
    const others = result.statuses.flatMap((status, i) => (i === index ? [] : [status]));
    expect(others).toEqual(Array(7).fill(200));
    expect(new Set(result.bodies.filter((_, i) => i !== index)).size).toBe(1);
    expect(db.queries).toBe(1);
    expect(await problems()).toEqual([]);
    console.log(`workerd upstash, ${who} aborted: 8 requests in ${result.ms} ms, ${db.queries} fill`);
  });
});
