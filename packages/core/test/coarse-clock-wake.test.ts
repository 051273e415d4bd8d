// A refresh that wakes the coarse clock's sleeping thread writes the time itself (clock.ts,
// wakeClockThread): the thread takes tens of microseconds to be scheduled, as long as the burst of
// stale reads that follows, which would otherwise each read the real clock. A file of its own: no
// thread has started in this process, so the "sleeping thread" is a state the test sets, and no
// real thread can write the time before the test looks (one would, on a warm machine, within
// microseconds).
import { afterEach, expect, it } from 'vitest';
import { createEntry } from '../src/adapter.js';
import { EXITED, IDLE, RUNNING, STATE } from '../src/clock.js';
import { type Cache, type CacheEntry, getOrComputeWith, stats } from '../src/node.js';
import { shared } from '../src/shared.js';
import { countingClockReads } from './clock-reads.js';
import { deferred } from './helpers.js';

const clock = shared.clock as NonNullable<typeof shared.clock>;
const SWR = { ttl: 60_000, staleWhileRevalidate: 60_000 };

afterEach(() => {
  clock.seconds[0] = 0;
  Atomics.store(clock.control, STATE, EXITED);
  clock.native = undefined;
});

/** A cache on a map that keeps what it is given: reading it reads no clock. */
function mapCache(entries: Map<string, CacheEntry>): Cache {
  return {
    name: 'map',
    get: (key) => entries.get(key),
    set: (key, entry) => {
      entries.set(key, entry);
    },
    delete: (key) => {
      entries.delete(key);
    },
  };
}

it('a refresh that wakes a sleeping thread writes the time itself: the burst after it reads no clock', async () => {
  expect(Atomics.load(clock.control, STATE)).toBe(EXITED); // no thread in this process
  Atomics.store(clock.control, STATE, IDLE);
  // Early in a second, so that the whole seconds written are not yet past the expiry (the reads
  // then rest on the refresh's start, as in coarse-clock.test.ts).
  while (Date.now() % 1_000 < 10 || Date.now() % 1_000 > 800) await new Promise((r) => setTimeout(r, 1));
  const now = Date.now();
  const entries = new Map([['k', createEntry('old', now - 1_005, now - 5, now + 30_000)]]);
  const cache = mapCache(entries);
  const gate = deferred<string>();
  const answers: Promise<unknown>[] = [];
  let written = 0;
  let burstReads = 0;
  countingClockReads(() => {
    answers.push(getOrComputeWith(cache, 'k', SWR, () => gate.promise));
    written = clock.seconds[0] as number;
    burstReads = countingClockReads(() => {
      for (let i = 0; i < 500; i++) answers.push(getOrComputeWith(cache, 'k', SWR, () => 'unused'));
    });
  });
  expect(Atomics.load(clock.control, STATE)).toBe(RUNNING);
  expect(written).toBe(Math.floor(now / 1000));
  // At most the sample taken every SAMPLE_EVERY hits.
  expect(burstReads).toBeLessThanOrEqual(1);
  expect(new Set(await Promise.all(answers))).toEqual(new Set(['old']));
  expect(stats()).toMatchObject({ staleHits: 501, backgroundRefreshes: 1, misses: 0 });
  gate.resolve('new');
});

it('a refresh under a replaced Date.now (fake timers) writes no time', async () => {
  expect(Atomics.load(clock.control, STATE)).toBe(EXITED);
  Atomics.store(clock.control, STATE, IDLE);
  clock.native = Date.now;
  const fake = Date.now;
  Date.now = () => fake() - 3_600_000;
  try {
    const now = Date.now();
    const entries = new Map([['j', createEntry('old', now - 1_005, now - 5, now + 30_000)]]);
    const gate = deferred<string>();
    expect(await getOrComputeWith(mapCache(entries), 'j', SWR, () => gate.promise)).toBe('old');
    expect(clock.seconds[0]).toBe(0);
    expect(Atomics.load(clock.control, STATE)).toBe(IDLE);
    gate.resolve('new');
  } finally {
    Date.now = fake;
  }
});
