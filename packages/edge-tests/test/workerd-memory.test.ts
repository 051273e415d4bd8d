import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type DbServer, startDbServer } from './db-server.js';
import { ABORTED, herd, herdWithAbort } from './herd.js';
import { bundleExample, nodeBuiltinsIn, readmeBlock } from './readme-example.js';
import { runtimeProblems, startWorker, type Worker } from './workerd.js';

// packages/memory/README.md's Workers example, bundled as a user would, in workerd.
const example = readmeBlock(
  'packages/memory/README.md',
  '**Edge runtimes.** Create the cache at module scope: it lives as long as the isolate and serves',
);

let db: DbServer;
let script: string;
let worker: Worker | undefined;

beforeAll(async () => {
  db = await startDbServer();
  script = await bundleExample(example, 'workerd', { dbUrl: db.url, prefix: 'unused:' });
  expect(nodeBuiltinsIn(script)).toEqual([]);
});

afterEach(async () => {
  await worker?.dispose();
  worker = undefined;
  db.reset();
});

afterAll(async () => {
  await db?.close();
});

describe('memory README example in workerd', () => {
  it('8 concurrent requests on a cold key in one isolate: 8 x 200, one value, 1 fill, no runtime warning', async () => {
    worker = await startWorker(script);
    const result = await herd(8, () => (worker as Worker).fetch('/'));
    expect(result.statuses).toEqual(Array(8).fill(200));
    expect(new Set(result.bodies).size).toBe(1);
    expect(db.queries).toBe(1);
    await worker.quiet();
    expect(runtimeProblems(worker.logs)).toEqual([]);
    console.log(`workerd memory: 8 requests in ${result.ms} ms, ${db.queries} fill`);
  });

  it.each([
    ['a joiner', 3, 40],
    ['the first request (whose fill it is)', 0, 60],
  ])('%s aborting mid-wait leaves the others their 200 and the one fill', async (who, index, after) => {
    worker = await startWorker(script);
    const w = worker;
    const result = await herdWithAbort(8, (init) => w.fetch('/', init), index, after);
    expect(result.statuses[index]).toBe(ABORTED);
    const others = result.statuses.flatMap((status, i) => (i === index ? [] : [status]));
    expect(others).toEqual(Array(7).fill(200));
    expect(new Set(result.bodies.filter((_, i) => i !== index)).size).toBe(1);
    expect(db.queries).toBe(1);
    await worker.quiet();
    expect(runtimeProblems(worker.logs)).toEqual([]);
    console.log(`workerd memory, ${who} aborted: 8 requests in ${result.ms} ms, ${db.queries} fill`);
  });
});

describe('what these checks catch', () => {
  it('the same example with configure({ isolatedRequests: false }) fails them: workerd cancels or strands the joiners', async () => {
    // Imports are hoisted, so this runs after the example's module scope and before any request.
    const off = `import { configure } from '@stampede/core';\nconfigure({ isolatedRequests: false });\n${example}`;
    worker = await startWorker(await bundleExample(off, 'workerd', { dbUrl: db.url, prefix: 'unused:' }));
    const w = worker;
    const result = await herd(8, () => w.fetch('/'), 2000);
    await worker.quiet();
    expect(result.statuses.filter((status) => status === 200).length).toBeLessThan(8);
    expect(runtimeProblems(worker.logs).join('\n')).toMatch(/different request context/);
    console.log(`workerd memory, isolatedRequests off: statuses ${result.statuses.join(' ')}`);
  });

  it('sees workerd refuse a promise shared across requests (so "no warning" above means something)', async () => {
    worker = await startWorker(`
      const waiting = [];
      export default {
        async fetch() {
          const answer = new Promise((resolve) => waiting.push(resolve));
          if (waiting.length === 1) setTimeout(() => { for (const resolve of waiting) resolve('v'); }, 50);
          return new Response(await answer);
        },
      };
    `);
    const w = worker;
    const result = await herd(3, () => w.fetch('/'));
    await worker.quiet();
    expect(result.statuses.filter((status) => status === 500).length).toBeGreaterThan(0);
    expect(runtimeProblems(worker.logs).join('\n')).toMatch(/different request context/);
  });
});
