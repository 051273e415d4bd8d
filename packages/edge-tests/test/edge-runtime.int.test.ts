import { waitFor } from '@stampede/test-support';
import { upstashKeys } from '@stampede/upstash';
import { EdgeRuntime } from 'edge-runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DbServer, startDbServer } from './db-server.js';
import { herd } from './herd.js';
import { bundleExample, nodeBuiltinsIn, readmeBlock } from './readme-example.js';
import { type RestServer, startRestServer } from './rest-server.js';

// packages/upstash/README.md's Vercel example, bundled as a user would (the real @vercel/functions
// included), in Vercel's edge runtime (the `edge-runtime` package) against a local Upstash REST server.
const example = readmeBlock('packages/upstash/README.md', 'Vercel (Edge or Node functions):');

let db: DbServer;
let rest: RestServer;

beforeAll(async () => {
  [db, rest] = await Promise.all([startDbServer(), startRestServer('edge-vercel')]);
});

afterAll(async () => {
  await db?.close();
  await rest?.stop();
});

describe('upstash README Vercel example in edge-runtime', () => {
  it('8 concurrent GETs on a cold key: one value, 1 fill; no node: builtin reachable', async () => {
    const prefix = rest.nextPrefix();
    const bundle = await bundleExample(example, 'edge-runtime', { dbUrl: db.url, prefix });
    expect(nodeBuiltinsIn(bundle)).toEqual([]);

    // What Vercel gives an edge function: `process.env`, and the request context through which
    // @vercel/functions' `waitUntil` hands work to the platform (here: collected and awaited below).
    const handedOver: Promise<unknown>[] = [];
    const runtime = new EdgeRuntime({
      extend: (context) =>
        Object.assign(context, {
          process: {
            env: { UPSTASH_REDIS_REST_URL: rest.server.url, UPSTASH_REDIS_REST_TOKEN: rest.server.token },
          },
          [Symbol.for('@vercel/request-context')]: {
            get: () => ({ waitUntil: (promise: Promise<unknown>) => handedOver.push(promise) }),
          },
        }),
      initialCode: bundle,
    });
    expect(
      runtime.evaluate('[typeof require, typeof module, typeof Buffer, typeof process.versions]'),
    ).toEqual(['undefined', 'undefined', 'undefined', 'undefined']);
    const GET = runtime.evaluate('example.GET') as () => Promise<Response>;
    expect(runtime.evaluate('example.runtime')).toBe('edge');

    const result = await herd(8, () => GET());
    expect(result.statuses).toEqual(Array(8).fill(200));
    expect(new Set(result.bodies).size).toBe(1);
    expect(JSON.parse(result.bodies[0] ?? '')).toEqual([{ id: 1, title: 'query 1' }]);
    expect(db.queries).toBe(1);

    // The write and the lock's release went through waitUntil, after the responses.
    expect(handedOver.length).toBeGreaterThan(0);
    await Promise.all(handedOver);
    const keys = upstashKeys(prefix, 'top-posts');
    const redis = rest.client();
    await waitFor(
      async () => (await redis.exists(keys.value)) === 1 && (await redis.exists(keys.lock)) === 0,
      {
        message: 'the value written and the lock released',
      },
    );
    const hit = await herd(1, () => GET());
    expect(hit.bodies[0]).toBe(result.bodies[0]);
    expect(db.queries).toBe(1);
    console.log(
      `edge-runtime upstash: 8 GETs in ${result.ms} ms, ${db.queries} fill, ${handedOver.length} promises to waitUntil; a hit in ${hit.ms} ms`,
    );
  });
});
