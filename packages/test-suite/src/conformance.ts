import { type Cache, type CacheEntry, getOrCompute, getValue, invalidate, setValue } from '@stampede/core';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

/** How to run the conformance suite against one adapter. */
export interface ConformanceOptions {
  /** Shown in the test names. */
  name: string;
  /** A new, empty cache: its own instance and (for remote adapters) its own key prefix. */
  create(): Cache | Promise<Cache>;
  /**
   * `'fake'`: the adapter's expiry follows `Date.now()`, so the suite uses fake timers.
   * `'real'`: the backend expires on its own clock (Redis), so the suite waits for real.
   */
  clock: 'fake' | 'real';
  /** Runs after the whole suite (close clients, remove the run's keys). */
  teardown?(): Promise<void> | void;
}

const ODD_KEYS = [
  'with space',
  'line\nbreak',
  'tab\tand\r\ncrlf',
  'unicode: héllo 🚀 世界',
  '{braces}',
  'a{b}c',
  '{}',
  'colon:separated:key',
  '*?[glob]',
  'k'.repeat(1_000),
];

const VALUES: [string, unknown][] = [
  ['null', null],
  ['zero', 0],
  ['false', false],
  ['empty string', ''],
  ['negative float', -12.5],
  ['unicode string', 'héllo 🚀, world'],
  ['array', [1, 'two', { three: 3 }, null]],
  ['nested object', { a: { b: { c: [1, 2, 3] } }, d: 'x|y|z', e: true }],
];

function entry(value: unknown, createdAt: number, ttl: number | undefined, grace = 0): CacheEntry {
  const freshUntil = ttl === undefined ? Number.POSITIVE_INFINITY : createdAt + ttl;
  const staleUntil = ttl === undefined ? Number.POSITIVE_INFINITY : freshUntil + grace;
  return { value, createdAt, freshUntil, staleUntil };
}

/** The conformance suite every stampede adapter runs. */
export function describeCacheConformance(options: ConformanceOptions): void {
  describe(`Cache conformance: ${options.name}`, () => {
    let cache: Cache;

    beforeEach(async () => {
      if (options.clock === 'fake') vi.useFakeTimers({ now: 1_700_000_000_000 });
      cache = await options.create();
    });
    afterEach(() => {
      vi.useRealTimers();
    });
    afterAll(async () => {
      await options.teardown?.();
    });

    const wait = async (ms: number) => {
      if (options.clock === 'fake') vi.advanceTimersByTime(ms);
      else await new Promise((resolve) => setTimeout(resolve, ms));
    };

    it('reads a missing key as undefined', async () => {
      expect(await cache.get('missing')).toBeUndefined();
    });

    it.each(VALUES)('round-trips %s with its times', async (_label, value) => {
      const now = Date.now();
      const written = entry(value, now, 60_000, 30_000);
      await cache.set('value', written, { ttl: 90_000 });
      expect(await cache.get('value')).toEqual(written);
    });

    it('round-trips an entry that never expires', async () => {
      const written = entry({ forever: true }, Date.now(), undefined);
      await cache.set('forever', written, { ttl: undefined });
      const read = await cache.get('forever');
      expect(read?.freshUntil).toBe(Number.POSITIVE_INFINITY);
      expect(read?.staleUntil).toBe(Number.POSITIVE_INFINITY);
      await wait(300);
      expect(await cache.get('forever')).toEqual(written);
    });

    it('drops an entry after its physical TTL', async () => {
      // Long enough that a loaded machine still reads it back before it lapses.
      await cache.set('short', entry('v', Date.now(), 1_000), { ttl: 1_000 });
      expect((await cache.get('short'))?.value).toBe('v');
      await wait(1_300);
      expect(await cache.get('short')).toBeUndefined();
    });

    it('deletes, and deleting a missing key is fine', async () => {
      await cache.set('gone', entry(1, Date.now(), 60_000), { ttl: 60_000 });
      await cache.delete('gone');
      expect(await cache.get('gone')).toBeUndefined();
      await expect(Promise.resolve(cache.delete('never-there'))).resolves.toBeUndefined();
    });

    it('never replaces a newer entry with an older one', async () => {
      const now = Date.now();
      await cache.set('order', entry('newer', now, 60_000), { ttl: 60_000 });
      await cache.set('order', entry('older', now - 1_000, 60_000), { ttl: 60_000 });
      expect((await cache.get('order'))?.value).toBe('newer');
      await cache.set('order', entry('newest', now + 1, 60_000), { ttl: 60_000 });
      expect((await cache.get('order'))?.value).toBe('newest');
    });

    it.each(ODD_KEYS.map((key) => [JSON.stringify(key).slice(0, 40), key]))(
      'keeps odd key %s apart from its neighbours',
      async (_label, key) => {
        await cache.set(key, entry(`value of ${key}`, Date.now(), 60_000), { ttl: 60_000 });
        expect((await cache.get(key))?.value).toBe(`value of ${key}`);
        for (const other of ODD_KEYS) {
          if (other !== key) expect(await cache.get(other)).toBeUndefined();
        }
        await cache.delete(key);
        expect(await cache.get(key)).toBeUndefined();
      },
    );

    it('isolates two instances (two prefixes never see each other)', async () => {
      const other = await options.create();
      await cache.set('shared-name', entry('mine', Date.now(), 60_000), { ttl: 60_000 });
      expect(await other.get('shared-name')).toBeUndefined();
      await other.set('shared-name', entry('theirs', Date.now(), 60_000), { ttl: 60_000 });
      expect((await cache.get('shared-name'))?.value).toBe('mine');
      await other.delete('shared-name');
      expect((await cache.get('shared-name'))?.value).toBe('mine');
    });

    it('serves getOrCompute: one fill for a herd, then hits', async () => {
      let fills = 0;
      const fill = async () => {
        fills++;
        return { count: 42 };
      };
      const herd = await Promise.all(
        Array.from({ length: 50 }, () => getOrCompute(cache, 'herd', 60_000, fill)),
      );
      expect(fills).toBe(1);
      for (const value of herd) expect(value).toEqual({ count: 42 });
      expect(await getOrCompute(cache, 'herd', 60_000, fill)).toEqual({ count: 42 });
      expect(fills).toBe(1);
    });

    it('agrees with setValue, getValue and invalidate', async () => {
      await setValue(cache, 'plain', { n: 1 }, { ttl: 60_000 });
      expect(await getValue(cache, 'plain')).toEqual({ n: 1 });
      expect(await getOrCompute(cache, 'plain', 60_000, () => ({ n: 2 }))).toEqual({ n: 1 });
      await invalidate(cache, 'plain');
      expect(await getValue(cache, 'plain')).toBeUndefined();
      expect(await getOrCompute(cache, 'plain', 60_000, () => ({ n: 3 }))).toEqual({ n: 3 });
    });

    describe('fill lock (when the adapter has one)', () => {
      it('grants one holder at a time and frees on release', async () => {
        if (cache.tryAcquireFillLock === undefined) return;
        const first = await cache.tryAcquireFillLock('locked', 5_000);
        expect(first).toBeDefined();
        expect(await cache.tryAcquireFillLock('locked', 5_000)).toBeUndefined();
        expect(await cache.tryAcquireFillLock('other-key', 5_000)).toBeDefined();
        await first?.release('filled');
        const again = await cache.tryAcquireFillLock('locked', 5_000);
        expect(again).toBeDefined();
        await again?.release('failed');
      });

      it('lapses after its TTL', async () => {
        if (cache.tryAcquireFillLock === undefined) return;
        expect(await cache.tryAcquireFillLock('lapsing', 100)).toBeDefined();
        await wait(350);
        expect(await cache.tryAcquireFillLock('lapsing', 100)).toBeDefined();
      });

      it('does not let an old holder release a newer holder', async () => {
        if (cache.tryAcquireFillLock === undefined) return;
        const old = await cache.tryAcquireFillLock('stolen', 100);
        await wait(350);
        const current = await cache.tryAcquireFillLock('stolen', 5_000);
        expect(current).toBeDefined();
        await old?.release('filled');
        expect(await cache.tryAcquireFillLock('stolen', 5_000)).toBeUndefined();
        await current?.release('filled');
      });
    });
  });
}
