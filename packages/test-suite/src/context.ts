import type { Cache } from '@stampede/core';
import { vi } from 'vitest';
import type { ConformanceOptions } from './options.js';

/** What every group of cases gets: the cache under test and the clock to wait on. */
export interface SuiteContext {
  readonly options: ConformanceOptions;
  /** The cache the current test runs on (created fresh before each test). */
  cache(): Cache;
  /** A second instance on the same namespace when the adapter offers one, else the same cache. */
  peer(): Promise<Cache>;
  /** Lets `ms` pass: fake timers advance, or real time goes by. */
  wait(ms: number): Promise<void>;
  /**
   * Waits until `check()` holds, up to `limit` ms (counted in steps, so it works on either clock),
   * then returns whether it held. Used only where a backend delivers asynchronously (pub/sub).
   */
  until(check: () => boolean, limit?: number): Promise<boolean>;
  /**
   * What `read()` answers once a change made on another instance has reached it: read once, or,
   * with `replicaLag`, read again (up to 2 s) until `settled` accepts the answer.
   */
  acrossReplicas<T>(read: () => PromiseLike<T> | T, settled: (value: T) => boolean): Promise<T>;
}

/** The context of one `describeCacheConformance` run; `current` is the cache of the running test. */
export function createContext(options: ConformanceOptions, current: () => Cache): SuiteContext {
  const wait = async (ms: number): Promise<void> => {
    if (options.clock === 'fake') await vi.advanceTimersByTimeAsync(ms);
    else await new Promise((resolve) => setTimeout(resolve, ms));
  };
  return {
    options,
    cache: current,
    async peer() {
      const cache = current();
      return options.replica === undefined ? cache : await options.replica(cache);
    },
    wait,
    async acrossReplicas(read, settled) {
      let value = await read();
      if (options.replicaLag !== true) return value;
      for (let waited = 0; !settled(value) && waited < 2_000; waited += 10) {
        await wait(10);
        value = await read();
      }
      return value;
    },
    async until(check, limit = 2_000) {
      const step = 10;
      for (let waited = 0; !check(); waited += step) {
        if (waited >= limit) return false;
        await wait(step);
      }
      return true;
    },
  };
}
