import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type GetOrComputeOptions,
  getOrComputeWith,
  type LockWaitEvent,
  onStampedeEvent,
  resetStats,
  stats,
} from '../src/index.js';
import { Backend, deferred, settle, testCache } from './helpers.js';

const LOCKED: GetOrComputeOptions = { ttl: '1m', distributedFillLock: true };
const T0 = 1_000_000;

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** A replica whose lock attempts are timestamped (ms since T0). */
/** A replica whose lock attempts are recorded (ms after T0), each answered `attemptMs` later. */
function replica(backend: Backend, push = false, attemptMs = 0) {
  const cache = testCache({ backend, lock: true, push, async: true });
  const attempts: number[] = [];
  const original = cache.tryAcquireFillLock;
  cache.tryAcquireFillLock = (key, ttl) => {
    attempts.push(Date.now() - T0);
    if (attemptMs === 0) return original?.(key, ttl);
    return new Promise((resolve) => setTimeout(() => resolve(original?.(key, ttl) as never), attemptMs));
  };
  return { cache, attempts };
}

/** A backend holding an expired, still readable 'k' whose fill took `delta` ms, locked by someone else. */
function heldWithExpired(delta: number): Backend {
  const backend = new Backend();
  backend.write(
    'k',
    { value: 'old', createdAt: T0 - 60_000, freshUntil: T0 - 1, staleUntil: T0 + 60_000, delta },
    60_000,
  );
  backend.lock('k', 60_000);
  return backend;
}

describe('distributed fill lock: the wait protocol', () => {
  it('polls from lockPollInterval doubling to a 1 s ceiling, re-trying the lock, then fills locally at lockWaitTimeout', async () => {
    const backend = new Backend();
    backend.lock('k', 60_000);
    const { cache, attempts } = replica(backend);
    const fill = vi.fn(() => 'local');
    const answer = getOrComputeWith(cache, 'k', LOCKED, fill);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(fill).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(await answer).toBe('local');
    expect(attempts).toEqual([0, 50, 150, 350, 750, 1_550, 2_550, 3_550, 4_550, 5_000]);
    expect(stats()).toMatchObject({ lockContended: 1, lockWaitTimeouts: 1, fills: 1, lockAcquired: 0 });
  });

  it("the first poll comes at the holder's expected finish (the delta of the entry read before), then the usual schedule", async () => {
    // An expired entry still readable, whose fill took 300 ms; someone else holds the lock.
    const { cache, attempts } = replica(heldWithExpired(300));
    const fill = vi.fn(() => 'local');
    const answer = getOrComputeWith(cache, 'k', LOCKED, fill);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await answer).toBe('local');
    expect(attempts).toEqual([0, 300, 350, 450, 650, 1_050, 1_850, 2_850, 3_850, 4_850, 5_000]);
  });

  it('with a delta of 0 and a slow lock attempt, the first poll comes at lostAt + 2 * (lostAt - triedAt)', async () => {
    const { cache, attempts } = replica(heldWithExpired(0), false, 20);
    const answer = getOrComputeWith(cache, 'k', { ...LOCKED, lockWaitTimeout: 200 }, () => 'local');
    await vi.advanceTimersByTimeAsync(400);
    expect(await answer).toBe('local');
    expect(attempts[1]).toBe(60);
  });

  it("with the entry's delta a loser takes the holder's value as soon as it lands, without it at the next poll", async () => {
    for (const delta of [300, undefined]) {
      resetStats();
      const backend = new Backend();
      const expired = {
        value: 'old',
        createdAt: Date.now() - 60_000,
        freshUntil: Date.now() - 1,
        staleUntil: Date.now() + 60_000,
      };
      backend.write('k', delta === undefined ? expired : { ...expired, delta }, 60_000);
      const holder = replica(backend);
      const loser = replica(backend);
      const a = getOrComputeWith(holder.cache, 'k', LOCKED, async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return 'new';
      });
      await vi.advanceTimersByTimeAsync(0);
      const waits: LockWaitEvent[] = [];
      const off = onStampedeEvent((event) => {
        if (event.type === 'lock-wait') waits.push(event);
      });
      const loserFill = vi.fn(() => 'loser');
      const b = getOrComputeWith(loser.cache, 'k', LOCKED, loserFill);
      await vi.advanceTimersByTimeAsync(1_000);
      off();
      expect([await a, await b]).toEqual(['new', 'new']);
      expect(loserFill).not.toHaveBeenCalled();
      // Polls without a delta: 50, 150, 350 ms.
      expect(waits.map((w) => [w.outcome, w.durationMs])).toEqual([['hit', delta === undefined ? 350 : 300]]);
      expect(loser.attempts.map((t) => t - (loser.attempts[0] ?? 0))).toEqual(
        delta === undefined ? [0, 50, 150] : [0],
      );
    }
  });

  it("a loser at or past the holder's expected finish falls back to the usual schedule", async () => {
    const backend = new Backend();
    backend.write(
      'k',
      { value: 'old', createdAt: T0 - 60_000, freshUntil: T0 - 1, staleUntil: T0 + 60_000, delta: 0 },
      60_000,
    );
    backend.lock('k', 60_000);
    const { cache, attempts } = replica(backend);
    const answer = getOrComputeWith(cache, 'k', { ...LOCKED, lockWaitTimeout: 400 }, () => 'local');
    await vi.advanceTimersByTimeAsync(400);
    expect(await answer).toBe('local');
    expect(attempts).toEqual([0, 50, 150, 350, 400]);
  });

  it("a loser gets the winner's value from the cache and never fills", async () => {
    const backend = new Backend();
    const winner = replica(backend);
    const loser = replica(backend);
    const gate = deferred<string>();
    const winnerFill = vi.fn(() => gate.promise);
    const loserFill = vi.fn(() => 'loser');
    const a = getOrComputeWith(winner.cache, 'k', LOCKED, winnerFill);
    await vi.advanceTimersByTimeAsync(0);
    const b = getOrComputeWith(loser.cache, 'k', LOCKED, loserFill);
    await vi.advanceTimersByTimeAsync(120);
    gate.resolve('winner');
    await vi.advanceTimersByTimeAsync(100);
    expect(await a).toBe('winner');
    expect(await b).toBe('winner');
    expect(loserFill).not.toHaveBeenCalled();
    expect(stats()).toMatchObject({ fills: 1, lockAcquired: 1, lockContended: 1, lockWaitHits: 1 });
    expect(winner.cache.calls.release).toEqual(['filled']);
  });

  it("an adapter whose onFillDone throws: the loser polls (still the winner's value), and the fault is counted and reported", async () => {
    const backend = new Backend();
    const winner = replica(backend);
    const loser = replica(backend, true);
    loser.cache.onFillDone = () => {
      throw new Error('subscriber broken');
    };
    const faults: string[] = [];
    const stop = onStampedeEvent((event) => {
      if (event.type === 'backend-error')
        faults.push(`${event.operation}: ${(event.error as Error).message}`);
    });
    try {
      const gate = deferred<string>();
      const a = getOrComputeWith(winner.cache, 'k', LOCKED, () => gate.promise);
      await vi.advanceTimersByTimeAsync(0);
      const b = getOrComputeWith(loser.cache, 'k', LOCKED, () => 'loser');
      await vi.advanceTimersByTimeAsync(120);
      gate.resolve('winner');
      await vi.advanceTimersByTimeAsync(200);
      expect(await a).toBe('winner');
      expect(await b).toBe('winner');
      expect(faults).toEqual(['subscribe: subscriber broken']);
      expect(stats()).toMatchObject({ fills: 1, lockWaitHits: 1, backendErrors: 1 });
    } finally {
      stop();
    }
  });

  it('N replicas x K callers on an expired key: 1 fill in total', async () => {
    const backend = new Backend();
    const replicas = Array.from({ length: 4 }, () => replica(backend));
    const fill = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return 'one';
    });
    const answers = replicas.flatMap(({ cache }) =>
      Array.from({ length: 250 }, () => getOrComputeWith(cache, 'k', LOCKED, fill)),
    );
    await vi.advanceTimersByTimeAsync(2_000);
    const values = await Promise.all(answers);
    expect(new Set(values)).toEqual(new Set(['one']));
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ fills: 1, lockWaitHits: 3, coalescedWaits: 4 * 249 });
  });

  it("a cached value every replica's checkValue refuses (a deploy changing its shape): 1 fill in total, not one per replica", async () => {
    const backend = new Backend();
    backend.write(
      'k',
      { value: { v: 1 }, createdAt: T0 - 1_000, freshUntil: T0 + 60_000, staleUntil: T0 + 60_000 },
      60_000,
    );
    const replicas = Array.from({ length: 4 }, () => replica(backend, true));
    const v2 = { ...LOCKED, checkValue: (value: unknown) => (value as { v?: number }).v === 2 || 'not v2' };
    const fill = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { v: 2 };
    });
    const answers = replicas.flatMap(({ cache }) =>
      Array.from({ length: 10 }, () => getOrComputeWith(cache, 'k', v2, fill)),
    );
    await vi.advanceTimersByTimeAsync(2_000);
    const values = await Promise.all(answers);
    expect(values.every((value) => (value as { v: number }).v === 2)).toBe(true);
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ fills: 1, lockWaitHits: 3 });
  });

  it('waiters whose wait began before a delete: the next holder fills once, its value is stored', async () => {
    const backend = new Backend();
    const replicas = Array.from({ length: 3 }, () => replica(backend, true));
    let fills = 0;
    const fill = async () => {
      const n = ++fills;
      await new Promise((resolve) => setTimeout(resolve, 300));
      return `fill ${n}`;
    };
    const answers = replicas.map(({ cache }) => settle(getOrComputeWith(cache, 'k', LOCKED, fill)));
    // The holder's fill runs; another replica deletes the key in the middle of it.
    await vi.advanceTimersByTimeAsync(100);
    replicas[0]?.cache.delete('k');
    await vi.advanceTimersByTimeAsync(3_000);
    await Promise.all(answers);
    // The holder's value predates the delete and is refused; the first waiter to take the lock
    // then fills (its fill started after the delete) and stores it, and the last takes that value.
    expect(fills).toBe(2);
    expect(backend.read('k')?.value).toBe('fill 2');
  });

  it("a crashed holder's lock lapses after lockTtl and a waiter takes over", async () => {
    const backend = new Backend();
    backend.lock('k', 1_000);
    const { cache, attempts } = replica(backend);
    const answer = getOrComputeWith(cache, 'k', { ...LOCKED, lockTtl: '1s' }, () => 'taken over');
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await answer).toBe('taken over');
    expect(attempts.at(-1)).toBe(1_550);
    expect(stats()).toMatchObject({ lockContended: 1, lockAcquired: 1, lockWaitTimeouts: 0 });
  });

  it('push wake-up: a waiter reads as soon as the holder announces the fill', async () => {
    const backend = new Backend();
    const winner = replica(backend, true);
    const loser = replica(backend, true);
    const gate = deferred<string>();
    const a = getOrComputeWith(winner.cache, 'k', { ...LOCKED, lockPollInterval: '1s' }, () => gate.promise);
    await vi.advanceTimersByTimeAsync(0);
    let answeredAt = 0;
    const b = getOrComputeWith(loser.cache, 'k', { ...LOCKED, lockPollInterval: '1s' }, () => 'loser').then(
      (value) => {
        answeredAt = Date.now() - T0;
        return value;
      },
    );
    await vi.advanceTimersByTimeAsync(10);
    gate.resolve('pushed');
    await vi.advanceTimersByTimeAsync(0);
    expect(await a).toBe('pushed');
    expect(await b).toBe('pushed');
    expect(answeredAt).toBe(10);
  });

  /**
   * A loser whose subscription is acknowledged `confirmAfter` ms after it asked (`signalReady`: the
   * adapter calls `ready` then; else it never does, like an adapter without the signal). Announcements
   * made before the acknowledgement are not heard, as on Redis before SUBSCRIBE is acknowledged.
   */
  function slowSubscriber(backend: Backend, confirmAfter: number, signalReady: boolean) {
    const loser = replica(backend);
    loser.cache.onFillDone = (key, listener, ready) => {
      let stopped = false;
      setTimeout(() => {
        if (stopped) return;
        let set = backend.listeners.get(key);
        if (set === undefined) {
          set = new Set();
          backend.listeners.set(key, set);
        }
        set.add(listener);
        if (signalReady) ready?.();
      }, confirmAfter);
      return () => {
        stopped = true;
        backend.listeners.get(key)?.delete(listener);
      };
    };
    return loser;
  }

  /** The holder fills in `fillMs`; the loser loses the lock at once. Resolves the loser's answer time. */
  async function raceSubscription(loser: ReturnType<typeof replica>, backend: Backend, fillMs: number) {
    const options: GetOrComputeOptions = { ...LOCKED, lockPollInterval: '1s' };
    const holder = replica(backend, true);
    const a = getOrComputeWith(holder.cache, 'k', options, async () => {
      await new Promise((resolve) => setTimeout(resolve, fillMs));
      return 'held';
    });
    await vi.advanceTimersByTimeAsync(0);
    let answeredAt = -1;
    const loserFill = vi.fn(() => 'loser');
    const b = getOrComputeWith(loser.cache, 'k', options, loserFill).then((value) => {
      answeredAt = Date.now() - T0;
      return value;
    });
    return { a, b, loserFill, answeredAt: () => answeredAt };
  }

  it('subscribe race: a fill that ends before the subscription is acknowledged is read at the acknowledgement', async () => {
    const backend = new Backend();
    const loser = slowSubscriber(backend, 5, true);
    const race = await raceSubscription(loser, backend, 2);
    await vi.advanceTimersByTimeAsync(5);
    expect(race.answeredAt()).toBe(5);
    expect(await race.b).toBe('held');
    expect(await race.a).toBe('held');
    expect(race.loserFill).not.toHaveBeenCalled();
    // One lock attempt (the lost one): the acknowledgement's read found the value.
    expect(loser.attempts).toEqual([0]);
  });

  it('subscribe race: without the acknowledgement the missed announcement costs a whole lockPollInterval', async () => {
    const backend = new Backend();
    const loser = slowSubscriber(backend, 5, false);
    const race = await raceSubscription(loser, backend, 2);
    await vi.advanceTimersByTimeAsync(999);
    expect(race.answeredAt()).toBe(-1);
    await vi.advanceTimersByTimeAsync(1);
    expect(race.answeredAt()).toBe(1_000);
    expect(await race.b).toBe('held');
  });

  it('subscribe race: acknowledged while the holder still fills, the waiter reads once, then hears the announcement', async () => {
    const backend = new Backend();
    const loser = slowSubscriber(backend, 5, true);
    const reads: number[] = [];
    const get = loser.cache.get;
    loser.cache.get = (key) => {
      reads.push(Date.now() - T0);
      return get.call(loser.cache, key);
    };
    const race = await raceSubscription(loser, backend, 40);
    await vi.advanceTimersByTimeAsync(40);
    expect(race.answeredAt()).toBe(40);
    expect(await race.b).toBe('held');
    // The miss read at 0, the acknowledgement's read at 5 (no lock attempt), the announcement's at 40.
    expect(reads).toEqual([0, 5, 40]);
    expect(loser.attempts).toEqual([0]);
    expect(race.loserFill).not.toHaveBeenCalled();
  });

  it('after a failed fill elsewhere a waiter re-contends at once instead of sleeping', async () => {
    const backend = new Backend();
    const winner = replica(backend, true);
    const loser = replica(backend, true);
    const a = settle(
      getOrComputeWith(winner.cache, 'k', { ...LOCKED, lockPollInterval: '1s' }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 30));
        throw new Error('db down');
      }),
    );
    await vi.advanceTimersByTimeAsync(0);
    const b = getOrComputeWith(
      loser.cache,
      'k',
      { ...LOCKED, lockPollInterval: '1s' },
      () => 'second filler',
    );
    await vi.advanceTimersByTimeAsync(30);
    expect(await b).toBe('second filler');
    expect(loser.attempts).toEqual([0, 30]);
    expect((await a).ok).toBe(false);
    expect(winner.cache.calls.release).toEqual(['failed']);
  });

  it("a wait that ends on a backend fault is a lock-wait with outcome 'error', counted in lockWaitErrors", async () => {
    const events: LockWaitEvent[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'lock-wait') events.push(event);
    });
    const backend = new Backend();
    backend.lock('k', 60_000);
    const { cache, attempts } = replica(backend);
    const lockAttempt = cache.tryAcquireFillLock;
    // The lock starts failing mid-wait: the first attempt (contended) works, the third throws.
    cache.tryAcquireFillLock = (key, ttl) => {
      if (attempts.length === 2) {
        attempts.push(Date.now() - T0);
        throw new Error('connection reset');
      }
      return lockAttempt?.(key, ttl);
    };
    const fill = vi.fn(() => 'local');
    const answer = getOrComputeWith(cache, 'k', LOCKED, fill);
    await vi.advanceTimersByTimeAsync(150);
    expect(await answer).toBe('local');
    off();
    expect(attempts).toEqual([0, 50, 150]);
    expect(events).toEqual([
      { type: 'lock-wait', cache: 'test', key: 'k', durationMs: 150, outcome: 'error' },
    ]);
    expect(stats()).toMatchObject({
      lockContended: 1,
      lockWaitErrors: 1,
      lockWaitTimeouts: 0,
      backendErrors: 1,
      fills: 1,
    });
  });

  it('a fault on the first lock attempt is no wait: a backend error, no lock-wait event', async () => {
    const events: string[] = [];
    const off = onStampedeEvent((event) => events.push(event.type));
    const cache = testCache({ lock: true, async: true });
    cache.tryAcquireFillLock = () => Promise.reject(new Error('NOSCRIPT'));
    expect(await getOrComputeWith(cache, 'k', LOCKED, () => 'local')).toBe('local');
    off();
    expect(events).toContain('backend-error');
    expect(events).not.toContain('lock-wait');
    expect(stats()).toMatchObject({ lockContended: 0, lockWaitErrors: 0, backendErrors: 1, fills: 1 });
  });

  it('extends the lock while a fill longer than lockTtl runs, so no second filler is admitted', async () => {
    const backend = new Backend();
    const first = replica(backend);
    const second = replica(backend);
    const options: GetOrComputeOptions = { ...LOCKED, lockTtl: 300, lockWaitTimeout: '10s' };
    const slow = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      return 'slow';
    });
    const a = getOrComputeWith(first.cache, 'k', options, slow);
    await vi.advanceTimersByTimeAsync(0);
    const b = getOrComputeWith(second.cache, 'k', options, slow);
    await vi.advanceTimersByTimeAsync(1_600);
    expect(await a).toBe('slow');
    expect(await b).toBe('slow');
    expect(slow).toHaveBeenCalledTimes(1);
  });

  it('warns when the lock is lost while its fill runs', async () => {
    const messages: string[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'warning') messages.push(event.message);
    });
    const backend = new Backend();
    const { cache } = replica(backend);
    const answer = getOrComputeWith(cache, 'k', { ...LOCKED, lockTtl: 300 }, async () => {
      backend.locks.delete('k');
      await new Promise((resolve) => setTimeout(resolve, 500));
      return 'done';
    });
    await vi.advanceTimersByTimeAsync(500);
    expect(await answer).toBe('done');
    off();
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain('lost');
  });

  it('releases the lock when fillTimeout gives the fill up, even if the fill never returns', async () => {
    const backend = new Backend();
    const { cache } = replica(backend);
    const caller = settle(
      getOrComputeWith(
        cache,
        'k',
        { ...LOCKED, lockTtl: 300, fillTimeout: 500 },
        () => new Promise(() => {}),
      ),
    );
    await vi.advanceTimersByTimeAsync(500);
    expect((await caller).ok).toBe(false);
    expect(cache.calls.release).toEqual(['failed']);
    expect(backend.locks.has('k')).toBe(false);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(backend.locks.has('k')).toBe(false);
    expect(await getOrComputeWith(cache, 'k', LOCKED, () => 'next')).toBe('next');
  });

  it('double-checks the cache after taking the lock', async () => {
    const backend = new Backend();
    const { cache } = replica(backend);
    // Another replica filled between our read (a miss) and our lock.
    const originalGet = cache.get;
    let reads = 0;
    cache.get = (key) => {
      reads++;
      if (reads === 2)
        backend.write(
          key,
          {
            value: 'elsewhere',
            createdAt: Date.now(),
            freshUntil: Date.now() + 60_000,
            staleUntil: Date.now() + 60_000,
          },
          60_000,
        );
      return originalGet.call(cache, key);
    };
    const fill = vi.fn(() => 'mine');
    expect(await getOrComputeWith(cache, 'k', LOCKED, fill)).toBe('elsewhere');
    expect(fill).not.toHaveBeenCalled();
  });

  it('on a cache without lock support: in-process protection and a one-time warning', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const events: string[] = [];
    const off = onStampedeEvent((event) => events.push(event.type));
    const cache = testCache();
    const fill = vi.fn(async () => 1);
    await Promise.all(Array.from({ length: 10 }, () => getOrComputeWith(cache, 'k', LOCKED, fill)));
    await getOrComputeWith(cache, 'other', LOCKED, fill);
    off();
    expect(fill).toHaveBeenCalledTimes(2);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toContain('tryAcquireFillLock');
    expect(events.filter((type) => type === 'warning')).toHaveLength(1);
  });

  it('on a cache that withdrew its lock (the member answers undefined): in-process protection, no warning of the core', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const base = testCache({ lock: true });
    // As a Redis binding whose user was refused scripts: it warned itself, and answers undefined.
    const cache = Object.assign(base, { tryAcquireFillLock: undefined });
    const fill = vi.fn(async () => 1);
    await Promise.all(Array.from({ length: 10 }, () => getOrComputeWith(cache, 'k', LOCKED, fill)));
    expect(fill).toHaveBeenCalledTimes(1);
    expect(stats()).toMatchObject({ lockAcquired: 0, lockContended: 0 });
    expect(warn).not.toHaveBeenCalled();
  });

  it('caches made alike print one warning line between them; each still emits its warning event', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const events: string[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'warning') events.push(event.cache);
    });
    // Twelve caches by one name (one per tenant, say), and one by another name.
    const twins = Array.from({ length: 12 }, () => testCache({ name: 'tenant-cache' }));
    const other = testCache({ name: 'other-cache' });
    for (const cache of [...twins, other]) await getOrComputeWith(cache, 'k', LOCKED, () => 1);
    off();
    expect(events).toEqual([...Array(12).fill('tenant-cache'), 'other-cache']);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(String(warn.mock.calls[0]?.[0])).toContain("cache 'tenant-cache'");
    expect(String(warn.mock.calls[1]?.[0])).toContain("cache 'other-cache'");
  });

  it('SWR refreshes honour the lock: at most one refresh fleet-wide', async () => {
    const backend = new Backend();
    const replicas = Array.from({ length: 3 }, () => replica(backend));
    const options: GetOrComputeOptions = { ...LOCKED, ttl: '30s', staleWhileRevalidate: '5m' };
    await getOrComputeWith(replica(backend).cache, 'k', options, () => 'v1');
    await vi.advanceTimersByTimeAsync(31_000);
    const refresh = vi.fn(async () => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return 'v2';
    });
    for (const { cache } of replicas) expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('v1');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(refresh).toHaveBeenCalledTimes(1);
    for (const { cache } of replicas) expect(await getOrComputeWith(cache, 'k', options, refresh)).toBe('v2');
  });
});
