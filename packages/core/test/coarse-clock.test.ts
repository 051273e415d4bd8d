// The coarse clock (clock.ts): a thread keeps a recent time that busy hit paths read instead of the
// real clock, for entries more than COARSE_MARGIN_MS from expiry. It must never let a value be
// served as fresh past its freshUntil, whatever the caller does, and must step aside for fake timers.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createEntry } from '../src/adapter.js';
import {
  COARSE_MARGIN_MS,
  clockThreadRunning,
  coarseNow,
  DISENGAGE_BEATS,
  LAG_LIMIT_MS,
  SAMPLE_EVERY,
} from '../src/clock.js';
import { configure, getOrCompute, getOrComputeWith, resetStats, stats } from '../src/node.js';
import { shared } from '../src/shared.js';
import { testCache } from './helpers.js';

const clock = shared.clock as NonNullable<typeof shared.clock>;

/**
 * Awaited hits on a warm key until the thread runs and has written the time (bounded). Always at
 * least DISENGAGE_BEATS samples' worth first, so that a thread already running has heard enough
 * heartbeats in its current second not to go to sleep while the test runs.
 */
async function engage(): Promise<void> {
  configure({ clockThread: true });
  const cache = testCache();
  await getOrCompute(cache, 'warm', '1h', () => 1);
  const giveUpAt = Date.now() + 10_000;
  for (let i = 0; i < 2 * DISENGAGE_BEATS * SAMPLE_EVERY; i++)
    await getOrCompute(cache, 'warm', '1h', () => 1);
  while (!clockThreadRunning()) {
    if (Date.now() > giveUpAt) throw new Error('the clock thread did not start within 10 s');
    for (let i = 0; i < SAMPLE_EVERY; i++) await getOrCompute(cache, 'warm', '1h', () => 1);
    // Let the thread's first write land (it starts on another thread, in some tens of ms).
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

beforeEach(() => {
  resetStats();
});
afterEach(() => {
  vi.useRealTimers();
  configure({ clockThread: true });
});

describe('the coarse clock', () => {
  it('starts under a sustained hit rate and keeps a time at most a few ticks behind the real one', async () => {
    await engage();
    const coarse = coarseNow();
    const real = Date.now();
    expect(coarse).toBeLessThanOrEqual(real);
    expect(real - coarse).toBeLessThan(LAG_LIMIT_MS);
  });

  /**
   * A cache that keeps entries a minute past their ttl (as an adapter with lazy physical expiry
   * does), so that only the core's own freshness check stands between a value and a late hit.
   */
  function lazyCache(): ReturnType<typeof testCache> {
    const cache = testCache();
    const set = cache.set.bind(cache);
    cache.set = (key, entry, options) => set(key, entry, { ...options, ttl: (options.ttl ?? 0) + 60_000 });
    return cache;
  }

  it.each([
    [
      'getOrCompute',
      (cache: ReturnType<typeof testCache>, ttl: number, fill: () => number) =>
        getOrCompute(cache, 'k', ttl, fill),
    ],
    [
      'getOrComputeWith',
      (cache: ReturnType<typeof testCache>, ttl: number, fill: () => number) =>
        getOrComputeWith(cache, 'k', { ttl }, fill),
    ],
  ])(
    '%s: a loop of awaited hits that never yields to timers sees the value expire at its freshUntil',
    async (_, call) => {
      await engage();
      const cache = lazyCache();
      let fills = 0;
      const fill = () => ++fills;
      // Long enough a ttl that the hits far from expiry read the coarse clock.
      const ttl = COARSE_MARGIN_MS + 300;
      // When each fill's value was first returned: its entry was created before that, so it is fresh
      // until no later than that + ttl.
      const firstSeen = new Map<number, number>();
      const servedLate: number[] = [];
      let hits = 0;
      const until = Date.now() + 2 * ttl + 200;
      for (let before = Date.now(); before < until; before = Date.now()) {
        const value = await call(cache, ttl, fill);
        const seen = firstSeen.get(value);
        if (seen === undefined) firstSeen.set(value, Date.now());
        const counted = stats().hits;
        // No slack: the call began at or after `before`; a fresh hit past the latest freshUntil its
        // value can have came too late.
        if (counted > hits && seen !== undefined && before >= seen + ttl)
          servedLate.push(before - seen - ttl);
        hits = counted;
      }
      expect(servedLate).toEqual([]);
      // Two expiries in the loop: the fill ran again each time.
      expect(fills).toBeGreaterThanOrEqual(3);
      expect(hits).toBeGreaterThan(10 * SAMPLE_EVERY);
      expect(clockThreadRunning()).toBe(true);
    },
  );
});

describe('earlyRefresh with the coarse clock', () => {
  afterEach(() => {
    configure({ random: Math.random });
  });

  // An entry 5 s from expiry whose fill took 10 s (beta 1): XFetch refreshes when
  // -10 s * ln(random()) >= the time left. By the coarse clock (whole seconds, the margin 2 s) the
  // time left lies in [left - 2 s, left] with left between 3.9 and 5 s; a draw decided by that range
  // needs no clock, one inside it reads the real clock.
  it.each([
    ['a draw past the range refreshes', 0.5, 1], // threshold 6.93 s
    ['a draw short of the range does not', 0.9, 0], // threshold 1.05 s
    ['a draw inside the range is settled by the real clock (here: not yet)', Math.exp(-0.35), 0], // 3.5 s
  ])('%s', async (_, draw, refreshes) => {
    await engage();
    configure({ random: () => draw });
    const cache = testCache();
    const now = Date.now();
    cache.backend.write('k', createEntry('old', now, now + 5_000, now + 5_000, 10_000), 60_000);
    resetStats();
    expect(await getOrComputeWith(cache, 'k', { ttl: '1h', earlyRefresh: true }, () => 'new')).toBe('old');
    expect(clockThreadRunning()).toBe(true);
    expect(stats()).toMatchObject({ hits: 1, earlyRefreshes: refreshes });
  });
});

describe('the coarse clock steps aside', () => {
  // A thread that stopped writing (a state it does not write in), its time left `lagMs` behind;
  // an entry the cache still holds, expired `expiredMs` ago but by that time still more than the
  // margin from its freshUntil. Ten minutes behind, and just past LAG_LIMIT_MS (2.5 to 3.5 s, whole
  // seconds): a limit ten times too lax would miss only the second.
  it.each([
    ['ten minutes', 600_000, 60_000],
    ['just past LAG_LIMIT_MS', LAG_LIMIT_MS + 1_000, 200],
  ])(
    'for a thread that stopped writing %s behind: trusted for at most SAMPLE_EVERY hits',
    async (_label, lagMs, expiredMs) => {
      await engage();
      const cache = testCache();
      const set = cache.set.bind(cache);
      cache.set = (key, entry, options) => set(key, entry, { ...options, ttl: 3_600_000 });
      let fills = 0;
      const fill = () => ++fills;
      await getOrCompute(cache, 'k', 60_000, fill);
      const { control, seconds } = clock;
      Atomics.store(control, 0, 99);
      await new Promise((resolve) => setTimeout(resolve, 50)); // a write it had begun has landed
      const now = Date.now();
      seconds[0] = Math.floor((now - lagMs) / 1000);
      const entry = cache.backend.read('k') as { freshUntil: number; staleUntil: number };
      entry.freshUntil = now - expiredMs;
      entry.staleUntil = now - expiredMs;
      expect(entry.freshUntil - coarseNow()).toBeGreaterThan(COARSE_MARGIN_MS);
      try {
        let calls = 0;
        while (fills === 1 && calls <= 2 * SAMPLE_EVERY) {
          await getOrCompute(cache, 'k', 60_000, fill);
          calls++;
        }
        expect(fills).toBe(2);
        expect(calls).toBeLessThanOrEqual(SAMPLE_EVERY);
        expect(seconds[0]).toBe(0);
      } finally {
        Atomics.store(control, 0, 1);
      }
    },
  );

  it('near the end of the grace: a value past its staleUntil is a miss, not a stale hit', async () => {
    await engage();
    const cache = testCache();
    const { control, seconds } = clock;
    Atomics.store(control, 0, 99);
    await new Promise((resolve) => setTimeout(resolve, 50)); // a write it had begun has landed
    const now = Date.now();
    // The coarse time is 1 to 2 s behind: by it the grace ends 0.9 to 1.9 s from now, within the
    // margin, so the real clock must decide, and by it the grace ended 100 ms ago.
    seconds[0] = Math.floor((now - 1_000) / 1000);
    cache.backend.write('k', createEntry('old', now - 20_000, now - 10_000, now - 100), 3_600_000);
    resetStats();
    try {
      const options = { ttl: 60_000, staleWhileRevalidate: 60_000 };
      expect(await getOrComputeWith(cache, 'k', options, () => 'new')).toBe('new');
      expect(stats()).toMatchObject({ staleHits: 0, misses: 1 });
    } finally {
      Atomics.store(control, 0, 1);
    }
  });

  it('for fake timers: a replaced Date.now is read, not the thread time', async () => {
    await engage();
    const cache = testCache();
    let fills = 0;
    const fill = () => ++fills;
    vi.useFakeTimers({ now: Date.now() });
    await getOrCompute(cache, 'k', 5_000, fill);
    await getOrCompute(cache, 'k', 5_000, fill);
    expect(fills).toBe(1);
    // The fake clock moves past freshUntil without a timer running; the thread's (real) time has not.
    vi.setSystemTime(Date.now() + 5_000);
    expect(await getOrCompute(cache, 'k', 5_000, fill)).toBe(2);
    expect(await getOrComputeWith(cache, 'k', { ttl: 5_000 }, fill)).toBe(2);
    vi.setSystemTime(Date.now() + 5_000);
    expect(await getOrComputeWith(cache, 'k', { ttl: 5_000 }, fill)).toBe(3);
  });

  it('configure({ clockThread: false }) stops it, and hits read the real clock', async () => {
    await engage();
    configure({ clockThread: false });
    expect(clockThreadRunning()).toBe(false);
    expect(coarseNow()).toBe(Number.POSITIVE_INFINITY);
    const cache = testCache();
    for (let i = 0; i < 40 * SAMPLE_EVERY; i++) await getOrCompute(cache, 'k', '1h', () => 1);
    expect(clockThreadRunning()).toBe(false);
    expect(() => configure({ clockThread: 'yes' as unknown as boolean })).toThrow(
      new TypeError('config.clockThread must be a boolean; got string'),
    );
  });

  it('when hits stop: the thread goes to sleep within about a second', async () => {
    await engage();
    const giveUpAt = Date.now() + 5_000;
    while (clockThreadRunning() && Date.now() < giveUpAt) await new Promise((r) => setTimeout(r, 50));
    expect(clockThreadRunning()).toBe(false);
    expect(coarseNow()).toBe(Number.POSITIVE_INFINITY);
    // And wakes again when they resume.
    await engage();
    expect(clockThreadRunning()).toBe(true);
  });
});

describe('a runtime whose threads cannot run the clock', () => {
  it('a start that throws is tried once: hits go on reading the real clock', async () => {
    await engage();
    configure({ clockThread: false }); // the running thread goes to sleep
    const { control } = clock;
    const saved = { start: clock.start, state: Atomics.load(control, 0) };
    let tries = 0;
    Atomics.store(control, 0, 3); // as if no thread had ever run
    clock.start = () => {
      tries++;
      throw new Error('worker_threads refused');
    };
    try {
      configure({ clockThread: true });
      const cache = testCache();
      let fills = 0;
      // Hits until the rate has asked for a thread (on a loaded machine it takes longer to reach
      // ENGAGE_RATE), then as many again: the start must not be tried a second time.
      const giveUpAt = Date.now() + 10_000;
      while (tries === 0 && Date.now() < giveUpAt) {
        for (let i = 0; i < SAMPLE_EVERY; i++) await getOrCompute(cache, 'k', '1h', () => ++fills);
      }
      for (let i = 0; i < 40 * SAMPLE_EVERY; i++) await getOrCompute(cache, 'k', '1h', () => ++fills);
      expect(tries).toBe(1);
      expect(clock.broken).toBe(true);
      expect(coarseNow()).toBe(Number.POSITIVE_INFINITY);
      expect(fills).toBe(1);
    } finally {
      clock.start = saved.start;
      clock.broken = false;
      Atomics.store(control, 0, saved.state);
    }
  });
});

describe('the coarse clock thread in a real process', () => {
  beforeAll(() => {
    // The fixture loads the built package, as an application would.
    buildIfStale([fileURLToPath(new URL('..', import.meta.url))]);
  });

  it('runs for both builds of the core (import and require) and never keeps the process alive', () => {
    const fixture = fileURLToPath(new URL('./fixtures/coarse-clock-exit.mjs', import.meta.url));
    const startedAt = Date.now();
    // The fixture ends without closing anything; execFileSync returns only once the process exits.
    const report = JSON.parse(
      execFileSync(process.execPath, [fixture], { encoding: 'utf8', timeout: 20_000 }),
    );
    expect(report.running).toBe(true);
    expect(report.lagMs).toBeLessThan(LAG_LIMIT_MS);
    expect(Date.now() - startedAt).toBeLessThan(20_000);
  });
});
