import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { decodeEnvelope, encodeEnvelope } from '../src/adapter.js';
import {
  type CacheEntry,
  configure,
  type GetOrComputeOptions,
  getOrComputeWith,
  inFlightCount,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  type StampedeStats,
  stats,
} from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';

const T0 = 1_000_000;
const DELTA = 100;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  configure({ maxBackgroundRefreshes: 64, random: Math.random });
  vi.useRealTimers();
});

/** mulberry32: a small seeded PRNG with uniform output in [0, 1). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** An entry as a fill that took `delta` ms would have written it, fresh for `remaining` more ms. */
function entryExpiringIn(remaining: number, delta: number | undefined = DELTA, value = 'v1'): CacheEntry {
  const now = Date.now();
  const entry = { value, createdAt: now - 1_000, freshUntil: now + remaining, staleUntil: now + remaining };
  return delta === undefined ? entry : { ...entry, delta };
}

function plant(backend: Backend, key: string, entry: CacheEntry): void {
  backend.write(key, entry, 3_600_000);
}

/** Identity 3 of stats.ts (with no fill still in its lock protocol) and identity 7. */
function expectIdentities(s: StampedeStats): void {
  expect(s.misses - s.coalescedWaits + s.backgroundRefreshes + s.earlyRefreshes).toBe(
    s.fills + s.lockWaitHits + s.fillsCancelled,
  );
  expect(s.earlyRefreshes + s.earlyRefreshesSkipped).toBeLessThanOrEqual(s.hits);
  expect(s.backgroundRefreshFailures).toBeLessThanOrEqual(s.backgroundRefreshes + s.earlyRefreshes);
}

describe('earlyRefresh: the XFetch test on a fresh hit', () => {
  it('a fill records its duration as the entry delta', async () => {
    const cache = testCache();
    const answer = getOrComputeWith(cache, 'k', { ttl: '1m' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 250));
      return 'v';
    });
    await vi.advanceTimersByTimeAsync(250);
    expect(await answer).toBe('v');
    expect(cache.backend.read('k')).toMatchObject({ value: 'v', delta: 250, createdAt: T0 });
  });

  it.each([1, 4])(
    'with random fixed, beta %d: refreshes exactly when now - delta*beta*ln(r) >= freshUntil',
    async (beta) => {
      const options: GetOrComputeOptions = { ttl: '1m', earlyRefresh: { beta } };
      const some = seeded(beta);
      for (const r of [0.9, 0.5, 0.1, 0.01, 1e-9, ...Array.from({ length: 100 }, some)]) {
        configure({ random: () => r });
        // The head start the formula grants, in whole ms: refresh at or below it, not above.
        const headStart = -DELTA * beta * Math.log(r);
        for (const remaining of [
          Math.floor(headStart) - 1,
          Math.floor(headStart),
          Math.floor(headStart) + 1,
          Math.ceil(headStart) + 1,
        ]) {
          if (remaining <= 0) continue;
          const cache = testCache();
          plant(cache.backend, 'k', entryExpiringIn(remaining));
          const fill = vi.fn(() => 'v2');
          expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('v1');
          const expected = Date.now() - DELTA * beta * Math.log(r) >= Date.now() + remaining;
          expect({ r, remaining, refreshed: fill.mock.calls.length }).toEqual({
            r,
            remaining,
            refreshed: expected ? 1 : 0,
          });
        }
      }
      // The default beta is 1.
      configure({ random: () => 0.5 });
      const cache = testCache();
      plant(cache.backend, 'k', entryExpiringIn(Math.floor(-DELTA * Math.log(0.5))));
      const fill = vi.fn(() => 'v2');
      await getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: true }, fill);
      expect(fill).toHaveBeenCalledTimes(1);
    },
  );

  const throwing = () => {
    throw new Error('entropy pool empty');
  };
  it.each([
    ['throws', throwing, 'threw (entropy pool empty)'],
    ['answers 2', () => 2, 'returned 2, not a number in [0, 1)'],
    ['answers NaN', () => Number.NaN, 'returned NaN, not a number in [0, 1)'],
    ['answers -0.5', () => -0.5, 'returned -0.5, not a number in [0, 1)'],
    ["answers '0.5'", () => '0.5' as unknown as number, 'returned string, not a number in [0, 1)'],
  ])(
    'a random source that %s costs the hit nothing: no refresh, the value, one warning per cache naming it',
    async (_label, random, said) => {
      configure({ random });
      const events: StampedeEvent[] = [];
      const stop = onStampedeEvent((event) => events.push(event));
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      try {
        const cache = testCache();
        plant(cache.backend, 'k', entryExpiringIn(DELTA));
        const fill = vi.fn(() => 'v2');
        for (let i = 0; i < 2; i++) {
          expect(await getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: true }, fill)).toBe('v1');
        }
        expect(fill).not.toHaveBeenCalled();
        const warnings = events.filter((event) => event.type === 'warning');
        expect(warnings).toHaveLength(1);
        expect((warnings[0] as { message: string }).message).toContain(`configure({ random }) ${said}`);
        expect(warn).toHaveBeenCalledTimes(1);
      } finally {
        stop();
        warn.mockRestore();
      }
    },
  );

  it('a draw of 0 counts as 2^-53: the head start is at most -ln(2^-53) (36.7) x delta x beta', async () => {
    configure({ random: () => 0 });
    for (const [beta, remaining, refreshes] of [
      [1, 36 * DELTA, 1],
      [1, 37 * DELTA, 0],
      [4, 36 * 4 * DELTA, 1],
      [4, 37 * 4 * DELTA, 0],
    ] as const) {
      const cache = testCache();
      plant(cache.backend, 'k', entryExpiringIn(remaining));
      const fill = vi.fn(() => 'v2');
      await getOrComputeWith(cache, 'k', { ttl: '1h', earlyRefresh: { beta } }, fill);
      expect({ beta, remaining, refreshes: fill.mock.calls.length }).toEqual({ beta, remaining, refreshes });
    }
  });

  it.each([
    [1, 50],
    [1, 100],
    [1, 300],
    [4, 200],
    [4, 800],
  ])(
    'beta %d, %d ms before expiry: the refresh rate matches exp(-remaining / (delta * beta))',
    async (beta, remaining) => {
      configure({ random: seeded(beta * 1_000 + remaining) });
      const cache = testCache();
      const trials = 10_000;
      for (let i = 0; i < trials; i++) plant(cache.backend, `k${i}`, entryExpiringIn(remaining));
      const fill = vi.fn(() => 'v2');
      for (let i = 0; i < trials; i++)
        await getOrComputeWith(cache, `k${i}`, { ttl: '1m', earlyRefresh: { beta } }, fill);
      const p = Math.exp(-remaining / (DELTA * beta));
      const sigma = Math.sqrt((p * (1 - p)) / trials);
      const rate = fill.mock.calls.length / trials;
      expect(Math.abs(rate - p)).toBeLessThan(4 * sigma);
      expect(stats()).toMatchObject({ hits: trials, earlyRefreshes: fill.mock.calls.length });
      expectIdentities(stats());
    },
  );

  it('no refresh far from expiry, nor for an entry whose fill time is unknown', async () => {
    configure({ random: seeded(7) });
    const cache = testCache();
    plant(cache.backend, 'far', entryExpiringIn(60_000));
    const { delta: _, ...old } = entryExpiringIn(1);
    plant(cache.backend, 'old', old);
    const fill = vi.fn(() => 'v2');
    for (let i = 0; i < 5_000; i++) {
      await getOrComputeWith(cache, 'far', { ttl: '1m', earlyRefresh: { beta: 4 } }, fill);
      await getOrComputeWith(cache, 'old', { ttl: '1m', earlyRefresh: { beta: 4 } }, fill);
    }
    expect(fill).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ hits: 10_000, earlyRefreshes: 0 });
  });

  it('off by default, and ttl undefined never refreshes (even when random() is 0)', async () => {
    configure({ random: () => 0 });
    const cache = testCache();
    plant(cache.backend, 'finite', entryExpiringIn(10));
    const forever = { ...entryExpiringIn(10), freshUntil: Number.POSITIVE_INFINITY };
    plant(cache.backend, 'forever', { ...forever, staleUntil: Number.POSITIVE_INFINITY });
    const fill = vi.fn(() => 'v2');
    await getOrComputeWith(cache, 'finite', { ttl: '1m' }, fill);
    await getOrComputeWith(cache, 'finite', { earlyRefresh: true }, fill);
    await getOrComputeWith(cache, 'finite', { ttl: undefined, earlyRefresh: { beta: 4 } }, fill);
    await getOrComputeWith(cache, 'forever', { ttl: '1m', earlyRefresh: true }, fill);
    expect(fill).not.toHaveBeenCalled();
    expect(stats().earlyRefreshes).toBe(0);
  });

  it('exactly one background refresh per key per process, which no caller waits for', async () => {
    configure({ random: () => 0.001 });
    const cache = testCache();
    plant(cache.backend, 'k', entryExpiringIn(500));
    const gate = deferred<string>();
    const seen: { background: boolean; stale: unknown }[] = [];
    const refresh = vi.fn((context: { background: boolean; stale: unknown }) => {
      seen.push({ background: context.background, stale: context.stale });
      return gate.promise;
    });
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    const answers = await Promise.all(
      Array.from({ length: 200 }, () =>
        getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: true }, refresh),
      ),
    );
    off();
    expect(new Set(answers)).toEqual(new Set(['v1']));
    expect(refresh).toHaveBeenCalledTimes(1);
    expect(seen).toEqual([{ background: true, stale: 'v1' }]);
    expect(events.filter((e) => e.type === 'early-refresh')).toEqual([
      { type: 'early-refresh', cache: 'test', key: 'k', remainingMs: 500, deltaMs: DELTA },
    ]);
    expect(stats()).toMatchObject({ hits: 200, earlyRefreshes: 1, backgroundRefreshes: 0, fills: 1 });
    vi.advanceTimersByTime(30);
    gate.resolve('v2');
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    // The new entry carries the refresh's own duration, and is a minute from expiry.
    expect(cache.backend.read('k')).toMatchObject({ value: 'v2', delta: 30 });
    configure({ random: () => 0.5 });
    expect(await getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: true }, refresh)).toBe('v2');
    expect(refresh).toHaveBeenCalledTimes(1);
    expectIdentities(stats());
  });

  it('a failed early refresh keeps the value and counts in backgroundRefreshFailures', async () => {
    configure({ random: () => 0.001 });
    const cache = testCache();
    plant(cache.backend, 'k', entryExpiringIn(500));
    const answer = await getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: true }, () => {
      throw new Error('db down');
    });
    await flush();
    expect(answer).toBe('v1');
    expect(cache.backend.read('k')?.value).toBe('v1');
    expect(stats()).toMatchObject({ earlyRefreshes: 1, fillFailures: 1, backgroundRefreshFailures: 1 });
    expectIdentities(stats());
  });

  it('honours the process-wide cap: a draw beyond it is skipped, counted and announced', async () => {
    configure({ random: () => 0.001, maxBackgroundRefreshes: 1 });
    const cache = testCache();
    plant(cache.backend, 'a', entryExpiringIn(500));
    plant(cache.backend, 'b', entryExpiringIn(500));
    const gate = deferred<string>();
    const fill = vi.fn(() => gate.promise);
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    expect(await getOrComputeWith(cache, 'a', { ttl: '1m', earlyRefresh: true }, fill)).toBe('v1');
    expect(await getOrComputeWith(cache, 'b', { ttl: '1m', earlyRefresh: true }, fill)).toBe('v1');
    off();
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({
      earlyRefreshes: 1,
      earlyRefreshesSkipped: 1,
      backgroundRefreshesSkipped: 0,
    });
    expect(events.filter((e) => e.type === 'refresh-skipped')).toEqual([
      { type: 'refresh-skipped', cache: 'test', key: 'b', early: true },
    ]);
    gate.resolve('v2');
    await flush();
    // The slot is back: the next draw on b refreshes it.
    await getOrComputeWith(cache, 'b', { ttl: '1m', earlyRefresh: true }, () => 'b2');
    await flush();
    expect(cache.backend.read('b')?.value).toBe('b2');
    expectIdentities(stats());
  });
});

describe('earlyRefresh with distributedFillLock', () => {
  const LOCKED: GetOrComputeOptions = { ttl: '1m', earlyRefresh: true, distributedFillLock: true };

  function replicas(backend: Backend, count: number) {
    return Array.from({ length: count }, (_, i) =>
      testCache({ backend, lock: true, async: true, name: `r${i}` }),
    );
  }

  /**
   * Two replicas on one backend, `'k'` fresh for `expiresIn` ms more and drawn to refresh on every hit:
   * replica A's hit has started a locked refresh that takes 3 delta and returns `value`.
   */
  async function holderRefreshingOnA(expiresIn: number, value: unknown) {
    configure({ random: () => 0.001 });
    const backend = new Backend();
    const [a, b] = replicas(backend, 2) as [ReturnType<typeof testCache>, ReturnType<typeof testCache>];
    plant(backend, 'k', entryExpiringIn(expiresIn));
    const slow = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, 3 * DELTA));
      return value;
    });
    const refreshB = vi.fn(() => 'never');
    await getOrComputeWith(a, 'k', LOCKED, slow);
    await vi.advanceTimersByTimeAsync(0);
    return { backend, a, b, slow, refreshB };
  }

  it('an early refresh whose lock attempt fails leaves the key to the fills at its expiry: no fill now', async () => {
    configure({ random: () => 0.001 });
    const backend = new Backend();
    const cache = testCache({ backend, lock: true, async: true });
    cache.tryAcquireFillLock = () => Promise.reject(new Error('redis down'));
    plant(backend, 'k', entryExpiringIn(600));
    const refresh = vi.fn(() => 'v2');
    expect(await getOrComputeWith(cache, 'k', LOCKED, refresh)).toBe('v1');
    await vi.advanceTimersByTimeAsync(10);
    expect(refresh).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ earlyRefreshes: 1, fills: 0, fillsCancelled: 1, backendErrors: 1 });
  });

  it("the lock holder refreshes although the value is still fresh; a replica that loses keeps serving, never fills, and takes the holder's value at its expected finish", async () => {
    configure({ random: () => 0.001 });
    // -DELTA * ln(0.001) is 690 ms: every hit in the last 690 ms draws a refresh.
    const backend = new Backend();
    const [a, b] = replicas(backend, 2) as [ReturnType<typeof testCache>, ReturnType<typeof testCache>];
    plant(backend, 'k', entryExpiringIn(600));
    const refreshA = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, DELTA));
      return 'v2';
    });
    const refreshB = vi.fn(() => 'never');
    expect(await getOrComputeWith(a, 'k', LOCKED, refreshA)).toBe('v1');
    await vi.advanceTimersByTimeAsync(0);
    expect(refreshA).toHaveBeenCalledTimes(1);
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    // B's callers answer at once, every time, while its refresh waits for A's value.
    for (let i = 0; i < 20; i++) {
      expect(await getOrComputeWith(b, 'k', LOCKED, refreshB)).toBe('v1');
      await vi.advanceTimersByTimeAsync(4);
    }
    // One lock attempt from B: its flight keeps further hits from contending again.
    expect(b.calls.lock).toBe(1);
    await vi.advanceTimersByTimeAsync(DELTA);
    off();
    expect(refreshB).not.toHaveBeenCalled();
    expect(await getOrComputeWith(b, 'k', { ttl: '1m' }, refreshB)).toBe('v2');
    const waits = events.filter((e) => e.type === 'lock-wait');
    expect(waits).toEqual([{ type: 'lock-wait', cache: 'r1', key: 'k', durationMs: DELTA, outcome: 'hit' }]);
    expect(stats()).toMatchObject({
      earlyRefreshes: 2,
      fills: 1,
      lockAcquired: 1,
      lockContended: 1,
      lockWaitHits: 1,
    });
    expectIdentities(stats());
  });

  it('a loser whose look at the expected finish finds no newer value yields: it neither waits further nor fills', async () => {
    const { backend, b, slow, refreshB } = await holderRefreshingOnA(600, 'v2');
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    expect(await getOrComputeWith(b, 'k', LOCKED, refreshB)).toBe('v1');
    await vi.advanceTimersByTimeAsync(DELTA);
    off();
    expect(events.filter((e) => e.type === 'lock-wait')).toEqual([
      { type: 'lock-wait', cache: 'r1', key: 'k', durationMs: DELTA, outcome: 'yielded' },
    ]);
    expect(inFlightCount(b)).toBe(0);
    expect(b.calls.lock).toBe(1);
    await vi.advanceTimersByTimeAsync(2 * DELTA);
    expect(refreshB).not.toHaveBeenCalled();
    expect(slow).toHaveBeenCalledTimes(1);
    expect(backend.read('k')?.value).toBe('v2');
    expect(stats()).toMatchObject({ earlyRefreshes: 2, fills: 1, fillsCancelled: 1, lockWaitTimeouts: 0 });
    expectIdentities(stats());
  });

  it("a loser a miss joined (its check refused the still-fresh value) does not yield: the miss gets the holder's value", async () => {
    const { b, slow, refreshB } = await holderRefreshingOnA(600, 42);
    // B's hit starts an early refresh, which loses the lock to A's.
    expect(await getOrComputeWith(b, 'k', LOCKED, refreshB)).toBe('v1');
    // A caller whose check refuses 'v1' misses and joins B's refresh: it must get a value its check
    // passes, not 'v1' again (before: the refresh yielded with 'v1', and this caller got an error).
    const numbers = {
      ...LOCKED,
      checkValue: (value: unknown) => typeof value === 'number' || 'not a number',
    };
    const joiner = settle(getOrComputeWith(b, 'k', numbers, () => -1));
    // A's value lands at 3 delta; B's next poll (lockPollInterval doubling) finds it.
    await vi.advanceTimersByTimeAsync(10 * DELTA);
    expect(await joiner).toEqual({ ok: true, value: 42 });
    expect(refreshB).not.toHaveBeenCalled();
    expect(slow).toHaveBeenCalledTimes(1);
    expectIdentities(stats());
  });

  it("a loser whose value expires during its look waits on like any lock loser: the misses that joined it get the holder's value", async () => {
    // Fresh for 50 ms more; the holder's refresh takes 3 delta (300 ms).
    const { b, refreshB } = await holderRefreshingOnA(50, 'v2');
    expect(await getOrComputeWith(b, 'k', LOCKED, refreshB)).toBe('v1');
    await vi.advanceTimersByTimeAsync(60);
    // Expired on B: this miss joins B's early flight, which must not give up on it.
    const late = getOrComputeWith(b, 'k', LOCKED, refreshB);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await late).toBe('v2');
    expect(refreshB).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ fills: 1, lockWaitHits: 1, fillsCancelled: 0, coalescedWaits: 1 });
    expectIdentities(stats());
  });

  it('a hot key on 4 replicas across 3 expiries: one refresh per period fleet-wide, no caller ever misses', async () => {
    configure({ random: seeded(42) });
    const backend = new Backend();
    const fleet = replicas(backend, 4);
    const options: GetOrComputeOptions = { ttl: 2_000, earlyRefresh: true, distributedFillLock: true };
    let fills = 0;
    const fill = async () => {
      fills++;
      await new Promise((resolve) => setTimeout(resolve, DELTA));
      return `v${fills}`;
    };
    const first = getOrComputeWith(fleet[0] as ReturnType<typeof testCache>, 'k', options, fill);
    await vi.advanceTimersByTimeAsync(DELTA);
    expect(await first).toBe('v1');
    resetStats();
    // Each replica reads every 10 ms (400 reads a second fleet-wide) for three ttl periods.
    for (let t = 0; t < 6_000; t += 10) {
      for (const cache of fleet) await getOrComputeWith(cache, 'k', options, fill);
      await vi.advanceTimersByTimeAsync(10);
    }
    const s = stats();
    expect(s.misses).toBe(0);
    // One refresh per ttl period fleet-wide: the other replicas' draws found the lock taken.
    expect(s.fills).toBe(3);
    expect(s.earlyRefreshes - s.fills).toBe(s.lockWaitHits + s.fillsCancelled);
    expect(s.lockWaitTimeouts).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expectIdentities(stats());
  });
});

describe('earlyRefresh: bad input and the random source', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])(
    'beta %d is a RangeError naming earlyRefresh.beta, before any read',
    async (beta) => {
      const cache = testCache();
      await expect(
        getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: { beta } }, () => 1),
      ).rejects.toThrow(RangeError);
      await expect(
        getOrComputeWith(cache, 'k', { ttl: '1m', earlyRefresh: { beta } }, () => 1),
      ).rejects.toThrow(/options\.earlyRefresh\.beta/);
      expect(cache.calls.get).toBe(0);
    },
  );

  it('a non-boolean, non-object earlyRefresh or a non-number beta is a TypeError naming it', async () => {
    const cache = testCache();
    const bad = [
      { earlyRefresh: 'yes' },
      { earlyRefresh: null },
      { earlyRefresh: { beta: '2' } },
    ] as unknown as GetOrComputeOptions[];
    for (const options of bad) {
      await expect(getOrComputeWith(cache, 'k', { ttl: '1m', ...options }, () => 1)).rejects.toThrow(
        /options\.earlyRefresh/,
      );
      await expect(getOrComputeWith(cache, 'k', { ttl: '1m', ...options }, () => 1)).rejects.toBeInstanceOf(
        TypeError,
      );
    }
    expect(cache.calls.get).toBe(0);
  });

  it('configure({ random }) must be a function and changes nothing when it is not', () => {
    const before = configure;
    expect(() => configure({ random: 0.5 as unknown as () => number })).toThrow(/config\.random/);
    expect(() => configure({ maxBackgroundRefreshes: 3, random: 'x' as unknown as () => number })).toThrow(
      TypeError,
    );
    expect(before).toBe(configure);
  });
});

describe('the envelope carries delta', () => {
  it('an s1 envelope of an older release still decodes, without delta', () => {
    const entry = decodeEnvelope('s1|1700000000000|1700000060000|1700000120000|{"n":1}');
    expect(entry).toEqual({
      value: { n: 1 },
      createdAt: 1_700_000_000_000,
      freshUntil: 1_700_000_060_000,
      staleUntil: 1_700_000_120_000,
    });
    expect('delta' in entry).toBe(false);
  });

  it('an entry with delta is s2 and round-trips it; one without stays s1', () => {
    const times = {
      createdAt: 1_700_000_000_000,
      freshUntil: 1_700_000_060_000,
      staleUntil: 1_700_000_060_000,
    };
    const text = encodeEnvelope({ value: 'v', ...times, delta: 137 });
    expect(text).toBe('s2|1700000000000|1700000060000|1700000060000|137|"v"');
    expect(decodeEnvelope(text)).toEqual({ value: 'v', ...times, delta: 137 });
    expect(encodeEnvelope({ value: 'v', ...times })).toBe('s1|1700000000000|1700000060000|1700000060000|"v"');
    // A payload that itself holds bars is not confused with the header.
    expect(decodeEnvelope(encodeEnvelope({ value: 'a|b|1', ...times, delta: 0 }))).toMatchObject({
      value: 'a|b|1',
      delta: 0,
    });
  });

  it('a malformed delta is a TypeError (a miss for the caller)', () => {
    for (const text of [
      's2|1|2|3|-4|"v"',
      's2|1|2|3|x|"v"',
      's2|1|2|3||"v"',
      's2|1|2|3|1e3|"v"',
      's2|1|2|3|',
    ]) {
      expect(() => decodeEnvelope(text)).toThrow(TypeError);
    }
  });
});
