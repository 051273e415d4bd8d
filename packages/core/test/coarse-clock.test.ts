// The coarse clock (clock.ts): a thread keeps a recent time that busy hit paths read instead of the
// real clock, for entries more than COARSE_MARGIN_MS from expiry. It must never let a value be
// served as fresh past its freshUntil, whatever the caller does, and must step aside for fake timers.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHANGES, createEntry } from '../src/adapter.js';
import {
  COARSE_MARGIN_MS,
  clockThreadRunning,
  coarseNow,
  DISENGAGE_BEATS,
  EXITED,
  IDLE,
  LAG_LIMIT_MS,
  RUNNING,
  SAMPLE_EVERY,
  STATE,
} from '../src/clock.js';
import {
  type Cache,
  type CacheEntry,
  configure,
  getOrCompute,
  getOrComputeWith,
  resetStats,
  stats,
} from '../src/node.js';
import { shared } from '../src/shared.js';
import { countingClockReads } from './clock-reads.js';
import { deferred, testCache } from './helpers.js';

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

describe('stale-while-revalidate with the coarse clock', () => {
  const SWR = { ttl: 60_000, staleWhileRevalidate: 60_000 };

  /** A cache on a map that keeps what it is given: reading it reads no clock, and expires nothing. */
  function mapCache(): Cache & { entries: Map<string, CacheEntry> } {
    const entries = new Map<string, CacheEntry>();
    return {
      name: 'map',
      entries,
      get: (key) => entries.get(key),
      set: (key, entry) => {
        entries.set(key, entry);
      },
      delete: (key) => {
        entries.delete(key);
      },
    };
  }

  /** An entry of `value` that expired `agoMs` ago, stale-servable for `graceMs` after that. */
  function expired(value: string, agoMs: number, graceMs: number): CacheEntry {
    const now = Date.now();
    return createEntry(value, now - agoMs - 1_000, now - agoMs, now - agoMs + graceMs);
  }

  /** Puts a running thread to sleep, as it does itself when hits stop, and waits until it sleeps. */
  async function sleepThread(): Promise<void> {
    Atomics.compareExchange(clock.control, STATE, RUNNING, IDLE);
    const giveUpAt = Date.now() + 5_000;
    while (clock.seconds[0] !== 0 && Date.now() < giveUpAt) await new Promise((r) => setTimeout(r, 5));
    expect(clockThreadRunning()).toBe(false);
  }

  /** The thread running (or asleep, with `asleep`), and the counters its start left reset. */
  async function ready(asleep = false): Promise<void> {
    await engage();
    if (asleep) await sleepThread();
    resetStats();
  }

  it('the reads during a refresh take the thread time, also in the second the entry expired in', async () => {
    await ready();
    // Early in a second, so that the whole seconds the thread writes are not yet past the expiry.
    while (Date.now() % 1_000 < 10 || Date.now() % 1_000 > 800) await new Promise((r) => setTimeout(r, 1));
    const cache = mapCache();
    cache.entries.set('k', expired('old', 5, 30_000));
    const entry = cache.entries.get('k') as CacheEntry;
    expect(coarseNow()).toBeLessThan(entry.freshUntil);
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', SWR, () => gate.promise)).toBe('old');
    const answers: Promise<unknown>[] = [];
    const reads = countingClockReads(() => {
      for (let i = 0; i < 500; i++) answers.push(getOrComputeWith(cache, 'k', SWR, () => 'unused'));
    });
    // At most one: the sample taken every SAMPLE_EVERY hits (500 reads without the thread).
    expect(reads).toBeLessThanOrEqual(1);
    expect(new Set(await Promise.all(answers))).toEqual(new Set(['old']));
    expect(stats()).toMatchObject({ staleHits: 501, backgroundRefreshes: 1, misses: 0 });
    gate.resolve('new');
  });

  it('a refresh wakes a sleeping thread at once', async () => {
    await ready(true);
    const cache = mapCache();
    cache.entries.set('k', expired('old', 100, 30_000));
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', SWR, () => gate.promise)).toBe('old');
    expect(Atomics.load(clock.control, STATE)).toBe(RUNNING);
    const giveUpAt = Date.now() + 5_000;
    while (!clockThreadRunning() && Date.now() < giveUpAt) await new Promise((r) => setTimeout(r, 1));
    expect(clockThreadRunning()).toBe(true);
    gate.resolve('new');
  });

  it('a refresh does not start a thread that ended', async () => {
    await ready();
    configure({ clockThread: false }); // the running thread goes to sleep
    const { control } = clock;
    const saved = { start: clock.start, state: Atomics.load(control, STATE) };
    let starts = 0;
    Atomics.store(control, STATE, EXITED);
    clock.start = () => {
      starts++;
    };
    try {
      configure({ clockThread: true });
      const cache = mapCache();
      cache.entries.set('k', expired('old', 100, 30_000));
      const gate = deferred<string>();
      expect(await getOrComputeWith(cache, 'k', SWR, () => gate.promise)).toBe('old');
      expect(stats().backgroundRefreshes).toBe(1);
      expect(starts).toBe(0);
      expect(Atomics.load(control, STATE)).toBe(EXITED);
      gate.resolve('new');
    } finally {
      clock.start = saved.start;
      Atomics.store(control, STATE, saved.state);
    }
  });

  it('near the end of the grace, during a refresh: a value past its staleUntil is a miss', async () => {
    await ready();
    const cache = mapCache();
    cache.entries.set('k', expired('old', 10_000, 60_000));
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', SWR, () => gate.promise)).toBe('old');
    const { control, seconds } = clock;
    Atomics.store(control, STATE, 99);
    await new Promise((resolve) => setTimeout(resolve, 50)); // a write it had begun has landed
    try {
      // The refresh started after freshUntil; the grace ended 100 ms ago, which the coarse time (1
      // to 2 s behind) cannot tell: the real clock must decide.
      const now = Date.now();
      seconds[0] = Math.floor((now - 1_000) / 1000);
      cache.entries.set('k', createEntry('old', now - 20_000, now - 10_000, now - 100));
      const late = getOrComputeWith(cache, 'k', SWR, () => 'unused');
      gate.resolve('new');
      expect(await late).toBe('new');
      expect(stats()).toMatchObject({ staleHits: 1, misses: 1, coalescedWaits: 1 });
    } finally {
      Atomics.store(control, STATE, RUNNING);
    }
  });

  it('near the end of the grace, a burst answered from its first read: a read past staleUntil is a miss', async () => {
    await ready();
    // An adapter with a change count: the burst's later reads are answered from its first one
    // (get-or-compute.ts, staleAgain), which must judge the time as a read would.
    const cache = Object.assign(mapCache(), { [CHANGES]: 0 });
    const start = Date.now();
    cache.entries.set('k', createEntry('old', start - 20_000, start - 10_000, start + 150));
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', SWR, () => gate.promise)).toBe('old');
    expect(await getOrComputeWith(cache, 'k', SWR, () => 'unused')).toBe('old');
    const { control, seconds } = clock;
    Atomics.store(control, STATE, 99);
    await new Promise((resolve) => setTimeout(resolve, 50)); // a write it had begun has landed
    try {
      while (Date.now() <= start + 150) await new Promise((resolve) => setTimeout(resolve, 10));
      // The grace has ended, which the coarse time (1 to 2 s behind) cannot tell.
      seconds[0] = Math.floor((Date.now() - 1_000) / 1000);
      const late = getOrComputeWith(cache, 'k', SWR, () => 'unused');
      gate.resolve('new');
      expect(await late).toBe('new');
      expect(stats()).toMatchObject({ staleHits: 2, misses: 1, coalescedWaits: 1 });
    } finally {
      Atomics.store(control, STATE, RUNNING);
    }
  });

  it('for fake timers: a refresh leaves the thread asleep, and the grace ends on the fake clock', async () => {
    await ready(true);
    vi.useFakeTimers({ now: Date.now() });
    const cache = mapCache();
    const options = { ttl: 1_000, staleWhileRevalidate: 1_000 };
    await getOrComputeWith(cache, 'k', options, () => 'old');
    vi.advanceTimersByTime(1_500);
    const gate = deferred<string>();
    expect(await getOrComputeWith(cache, 'k', options, () => gate.promise)).toBe('old');
    expect(Atomics.load(clock.control, STATE)).toBe(IDLE);
    expect(await getOrComputeWith(cache, 'k', options, () => 'unused')).toBe('old');
    // Past staleUntil by the fake clock (the map still holds the entry): a miss that joins the refresh.
    vi.advanceTimersByTime(1_000);
    const late = getOrComputeWith(cache, 'k', options, () => 'unused');
    gate.resolve('new');
    expect(await late).toBe('new');
    expect(stats()).toMatchObject({ staleHits: 2, backgroundRefreshes: 1, coalescedWaits: 1 });
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
