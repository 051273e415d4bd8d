import * as core from '@stampede/core';
import { runSchedule, type ScheduleTarget, scheduleArbitrary } from '@stampede/test-support/schedules';
import fc from 'fast-check';
import { afterEach, describe, it, vi } from 'vitest';
import { createMemoryCache, type MemoryCache } from '../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

let run = 0;

// One in-process cache (no lock), driven by fake timers. The adapter's own delete() (or clear(), in
// half the variants) stands for a write the core does not see.
const target: ScheduleTarget<MemoryCache> = {
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
  lock: false,
  maxReplicas: 1,
  replicas(_count, variant) {
    run++;
    const cache = createMemoryCache({ max: 100, name: `memory-schedule-${run}` });
    return {
      caches: [cache],
      names: [cache.name],
      remove: (target, key) => ((variant & 1) === 1 ? target.clear() : target.delete(key)),
    };
  },
  before: () => void vi.useFakeTimers({ now: 1_000_000 }),
  after: () => void vi.useRealTimers(),
};

describe('the memory cache under random schedules', () => {
  it('keeps every invariant (no hang, no older value after a write, empty registries, counter identities)', async () => {
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(target, 60), (schedule) => runSchedule(target, schedule)),
      { numRuns: 300 },
    );
  });
});

describe('the memory cache under random schedules with tags', () => {
  it('never serves a tagged value older than a tag invalidation that resolved before the call', async () => {
    const tagged = { ...target, tags: true };
    await fc.assert(
      fc.asyncProperty(scheduleArbitrary(tagged, 60), (schedule) => runSchedule(tagged, schedule)),
      { numRuns: 200 },
    );
  });
});
