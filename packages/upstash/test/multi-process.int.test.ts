import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { StampedeStats } from '@stampede/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { builtEntry } from './built-package.js';
import { type Harness, startHarness } from './harness.js';

interface Done {
  type: 'done';
  fills: number;
  values: string[];
  ms: number;
  stats: StampedeStats;
}

let h: Harness;
const children = new Set<ChildProcess>();
beforeAll(async () => {
  builtEntry();
  h = await startHarness('upstash-mp');
});
afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});
afterAll(async () => {
  await h?.stop();
});

interface Replica {
  readonly child: ChildProcess;
  next(type: string): Promise<Record<string, unknown>>;
}

async function replica(env: Record<string, string | number>): Promise<Replica> {
  const child = fork(join(import.meta.dirname, 'fixtures', 'herd-child.mjs'), [], {
    env: {
      ...process.env,
      UPSTASH_URL: h.server.url,
      UPSTASH_TOKEN: h.server.token,
      ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  const inbox: Record<string, unknown>[] = [];
  const waiting: { type: string; resolve: (message: Record<string, unknown>) => void }[] = [];
  child.on('message', (message: Record<string, unknown>) => {
    const at = waiting.findIndex((w) => w.type === message.type);
    if (at === -1) inbox.push(message);
    else waiting.splice(at, 1)[0]?.resolve(message);
  });
  const next = (type: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const at = inbox.findIndex((m) => m.type === type);
      if (at !== -1) return resolve(inbox.splice(at, 1)[0] as Record<string, unknown>);
      waiting.push({ type, resolve });
      child.once('exit', (code, signal) =>
        reject(new Error(`replica exited (${code ?? signal}) before '${type}'`)),
      );
    });
  await next('ready');
  return { child, next };
}

describe('separate processes sharing the lock over HTTP', () => {
  it('3 processes x 200 concurrent callers on a cold key: 1 fill in total', async () => {
    const env = {
      PREFIX: h.nextPrefix(),
      CALLERS: 200,
      FILL_MS: 300,
      LOCK_TTL: 10_000,
      LOCK_WAIT_TIMEOUT: 5_000,
    };
    const replicas = await Promise.all([replica(env), replica(env), replica(env)]);
    for (const r of replicas) r.child.send('go');
    const results = (await Promise.all(replicas.map((r) => r.next('done')))) as unknown as Done[];

    expect(results.reduce((sum, r) => sum + r.fills, 0)).toBe(1);
    const values = new Set(results.flatMap((r) => r.values));
    expect(values.size).toBe(1);
    const total = (stat: keyof StampedeStats) => results.reduce((sum, r) => sum + r.stats[stat], 0);
    expect(total('misses')).toBe(600);
    expect(total('coalescedWaits')).toBe(597);
    // The two others get the holder's value: by waiting for it, or (a replica whose lock attempt came
    // after the holder's commit) by taking the free lock and finding the value with it.
    expect(total('lockWaitHits')).toBe(2);
    expect(total('lockAcquired')).toBeGreaterThanOrEqual(1);
    expect(total('lockAcquired') + total('lockContended')).toBeGreaterThanOrEqual(3);
    expect(total('lockWaitTimeouts')).toBe(0);
    expect(total('backendErrors')).toBe(0);
    console.log(
      `3 x 200 callers: 1 fill; per-replica wall time ${results.map((r) => `${r.ms} ms`).join(', ')}; ` +
        `${h.server.stats().requests} REST requests so far`,
    );
  });

  it('replaces a holder killed mid-fill once its lockTtl lapses (not after lockWaitTimeout)', async () => {
    const prefix = h.nextPrefix();
    const lockTtl = 1_000;
    const holder = await replica({
      PREFIX: prefix,
      CALLERS: 1,
      FILL_MS: 0,
      LOCK_TTL: lockTtl,
      LOCK_WAIT_TIMEOUT: 8_000,
      MODE: 'hang',
    });
    holder.child.send('go');
    await holder.next('filling');
    const heir = await replica({
      PREFIX: prefix,
      CALLERS: 50,
      FILL_MS: 50,
      LOCK_TTL: lockTtl,
      LOCK_WAIT_TIMEOUT: 8_000,
    });
    heir.child.send('go');
    // Kill the holder while the heir waits for its lock, not before the heir asked.
    await heir.next('waiting');
    holder.child.kill('SIGKILL');
    const killedAt = Date.now();
    const done = (await heir.next('done')) as unknown as Done;
    const afterKill = Date.now() - killedAt;

    expect(done.fills).toBe(1);
    expect(done.values).toEqual([JSON.stringify({ filledBy: heir.child.pid })]);
    expect(done.stats.lockContended).toBe(1);
    expect(done.stats.lockAcquired).toBe(1);
    expect(done.stats.lockWaitTimeouts).toBe(0);
    // The lock lapses at most lockTtl after the kill; the heir's poll (1 s ceiling) then takes it.
    expect(afterKill).toBeLessThan(lockTtl + 2_000);
    console.log(`killed holder replaced ${afterKill} ms after SIGKILL (lockTtl ${lockTtl} ms)`);
  });
});
