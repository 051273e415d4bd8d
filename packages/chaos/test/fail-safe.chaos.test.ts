import { broadcast, randomPrefix, type Worker } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeApps, startApps } from './support/fleet.js';
import { deletePrefix, sharedRedis } from './support/redis.js';

// The database goes down for 10 s under steady load from 4 app processes on one Redis, with the fill
// lock and fail-safe: callers keep getting the last good value, the fleet tries the database at most
// once per throttle, and fresh values are back within one throttle of the database returning.

const PROCESSES = 4;
const TTL = 500;
const THROTTLE = 2_000;
const WARM_UP = 1_500;
const DOWN = 10_000;
const AFTER = 4_000;
const INTERVAL = 20;
// Two shared cores and four processes: timers and round trips run late, never early.
const SLACK = 1_000;

interface Call {
  start: number;
  end: number;
  ok: boolean;
  at?: number;
  error?: string;
}
interface OutageReport {
  id: string;
  pid: number;
  calls: Call[];
  fills: { at: number; ok: boolean }[];
}

const prefix = randomPrefix('chaos-fail-safe');
let apps: Worker[] = [];
let admin: Redis;

beforeAll(async () => {
  const redis = await sharedRedis();
  admin = new Redis(redis.url);
  apps = await startApps(PROCESSES, { url: redis.url, prefix, operationTimeout: 1_000 });
});
afterAll(async () => {
  await closeApps(apps);
  await deletePrefix(admin, prefix);
  admin.disconnect();
});

describe('database down for 10 s, 4 processes, Redis with the lock and fail-safe', () => {
  it('0 errors, at most one fill attempt per throttle fleet-wide, fresh values within a throttle of recovery', async () => {
    const startAt = Date.now() + 500;
    const downFrom = startAt + WARM_UP;
    const downUntil = downFrom + DOWN;
    const endAt = downUntil + AFTER;
    const reports = await broadcast<OutageReport>(
      apps,
      {
        cmd: 'outage',
        key: 'bookmark_count',
        options: {
          ttl: TTL,
          distributedFillLock: true,
          lockWaitTimeout: 5_000,
          fillTimeout: 3_000,
          failSafe: { maxStale: '1m', throttle: THROTTLE },
        },
        startAt,
        endAt,
        intervalMs: INTERVAL,
        downFrom,
        downUntil,
      },
      (report) => 'calls' in report,
      endAt - Date.now() + 30_000,
    );
    const calls = reports.flatMap((report) => report.calls);
    const fills = reports.flatMap((report) => report.fills).sort((x, y) => x.at - y.at);
    const failed = fills.filter((fill) => !fill.ok);
    const firstBack = fills.find((fill) => fill.ok && fill.at >= downUntil);
    const summary = {
      calls: calls.length,
      errors: calls.filter((call) => !call.ok).length,
      fills: fills.length,
      failedAttempts: failed.map((fill) => fill.at - downFrom),
      firstFreshAfterRecoveryMs: firstBack === undefined ? undefined : firstBack.at - downUntil,
      maxCallMs: Math.max(...calls.map((call) => call.end - call.start)),
    };
    console.log(JSON.stringify(summary));

    // Steady load from every process, and not one error returned to a caller.
    expect(calls.length).toBeGreaterThan(PROCESSES * 200);
    expect(calls.filter((call) => !call.ok).map((call) => call.error)).toEqual([]);

    // During the outage the database is tried, fleet-wide, at most once per throttle (the first
    // failure may come right at downFrom) and still tried: it is not given up on.
    expect(failed.length).toBeLessThanOrEqual(Math.floor(DOWN / THROTTLE) + 1);
    expect(failed.length).toBeGreaterThanOrEqual(Math.floor(DOWN / THROTTLE) - 2);
    for (let i = 1; i < failed.length; i++) {
      expect((failed[i]?.at ?? 0) - (failed[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(THROTTLE - 50);
    }

    // Fresh values within one throttle of the database returning...
    expect(firstBack).toBeDefined();
    expect((firstBack?.at ?? Number.POSITIVE_INFINITY) - downUntil).toBeLessThanOrEqual(THROTTLE + SLACK);
    // ...and every call that starts once that value has had time to land gets a value filled after it.
    const settledAfter = (firstBack?.at ?? 0) + SLACK;
    const late = calls.filter((call) => call.start >= settledAfter);
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((call) => (call.at ?? 0) < downUntil)).toEqual([]);
  });
});
