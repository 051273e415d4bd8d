import { runSchedule, type ScheduleTarget, scheduleArbitrary } from '@stampede/test-support/schedules';
import fc from 'fast-check';
import { afterEach, describe, it, vi } from 'vitest';
import * as core from '../src/index.js';
import { Backend, testCache } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

let run = 0;

// Replicas are test caches over one shared backend, with the fill lock, driven by fake timers;
// variants answer reads synchronously, with promises, or after a delay, with or without push wake-up.
const target: ScheduleTarget<core.Cache> = {
  api: core,
  clock: { advance: async (ms) => void (await vi.advanceTimersByTimeAsync(ms)) },
  durations: {
    ttl: 100,
    grace: 300,
    fillMs: 300,
    fillTimeout: 400,
    abortAfter: 300,
    advance: 250,
    lockTtl: 1_000,
    lockWaitTimeout: 500,
    lockPollInterval: 20,
  },
  lock: true,
  maxReplicas: 3,
  replicas(count, variant) {
    const backend = new Backend();
    run++;
    const caches = Array.from({ length: count }, (_, index) =>
      testCache({
        backend,
        name: `schedule-${run}-${index}`,
        async: (variant & 1) === 1,
        push: (variant & 2) === 2,
        readDelay: (variant & 4) === 4 ? 3 : undefined,
        lock: true,
        tags: true,
      }),
    );
    return {
      caches,
      names: caches.map((cache) => cache.name as string),
      remove: (cache, key) => cache.delete(key) as Promise<void> | void,
    };
  },
  before: () => void vi.useFakeTimers({ now: 1_000_000 }),
  after: () => void vi.useRealTimers(),
};

describe('single-flight, SWR, lock, abort, timeout and writes under random schedules', () => {
  it('keeps every invariant (no hang, no older value after a write, empty registries, counter identities)', async () => {
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(target, 60), (schedule) => runSchedule(target, schedule)),
      { numRuns: 300 },
    );
  });
});

describe('the same with tags: tagged fills and setValue, invalidateTag of one key or of all', () => {
  it('never serves a tagged value older than a tag invalidation that resolved before the call', async () => {
    const tagged = { ...target, tags: true };
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(tagged, 60), (schedule) => runSchedule(tagged, schedule)),
      { numRuns: 200 },
    );
  });
});
