import { join } from 'node:path';
import { waitFor } from '@stampede/test-support';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upstashKeys } from '../src/index.js';
import { builtEntry } from './built-package.js';
import { type Harness, startHarness } from './harness.js';

interface WorkerAnswer {
  fills: number;
  distinct: number;
  value: { computed: string };
  ms: number;
  stats: Record<string, number>;
  hasProcess: boolean;
  warnings: string[];
}

let h: Harness;
let mf: Miniflare | undefined;
let prefix: string;

beforeAll(async () => {
  const entry = builtEntry();
  h = await startHarness('upstash-edge');
  prefix = h.nextPrefix();
  const bundle = await build({
    entryPoints: [join(import.meta.dirname, 'fixtures', 'edge-worker.ts')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'browser'],
    alias: { '@stampede/upstash': entry },
    external: ['cloudflare:workers'],
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]?.text;
  if (script === undefined) throw new Error('esbuild produced no worker bundle');
  expect(script).not.toMatch(/from ["']node:/);
  mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-01-01',
    bindings: {
      UPSTASH_URL: h.server.url,
      UPSTASH_TOKEN: h.server.token,
      PREFIX: prefix,
    },
  });
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  await h?.stop();
});

async function ask(query: string): Promise<WorkerAnswer> {
  if (mf === undefined) throw new Error('miniflare did not start');
  const res = await mf.dispatchFetch(`http://worker.test/?${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as WorkerAnswer;
}

describe('@stampede/core + @stampede/upstash inside workerd (miniflare)', () => {
  it('coalesces a herd inside one worker request into 1 fill, then serves a hit', async () => {
    const first = await ask('key=hot&herd=50');
    expect(first.hasProcess).toBe(false);
    expect(first.fills).toBe(1);
    expect(first.distinct).toBe(1);
    expect(first.stats).toMatchObject({ misses: 50, coalescedWaits: 49, fills: 1, lockAcquired: 1 });
    expect(first.stats.backendErrors).toBeUndefined();

    // The write (and the lock release) run after the first response, kept alive by waitUntil.
    const keys = upstashKeys(prefix, 'hot');
    const raw = h.client({ automaticDeserialization: false });
    await waitFor(async () => (await raw.exists(keys.value)) === 1 && (await raw.exists(keys.lock)) === 0, {
      message: 'the write to land and the lock to be released after the response',
    });
    const second = await ask('key=hot&herd=1');
    expect(second.fills).toBe(0);
    expect(second.value).toEqual(first.value);
    expect(second.stats).toEqual({ hits: 1 });
    console.log(`workerd: herd of 50 in ${first.ms} ms with 1 fill; hit in ${second.ms} ms`);
  });

  it("says once that a waitUntil passed without its object throws (workerd's Illegal invocation), and still answers", async () => {
    const answer = await ask('key=unbound&herd=5&unbound=1');
    expect(answer.fills).toBe(1);
    expect(answer.distinct).toBe(1);
    expect(answer.warnings).toHaveLength(1);
    expect(answer.warnings[0]).toMatch(
      /^stampede: the waitUntil given to cache 'upstash' threw \(.*Illegal invocation.*\): the work handed to it .* is not kept alive after the response/,
    );
    const again = await ask('key=unbound-2&herd=1&unbound=1');
    expect(again.warnings).toEqual([]);
  });

  it('still answers from the fill inside the worker while the REST server fails', async () => {
    h.server.setFault('500');
    try {
      const answer = await ask('key=broken&herd=20');
      expect(answer.fills).toBe(1);
      expect(answer.distinct).toBe(1);
      expect(answer.stats.backendErrors).toBeGreaterThanOrEqual(2);
    } finally {
      h.server.setFault(null);
    }
  });
});
