import { encodeEnvelope } from '@stampede/core/adapter';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { busChannel, checkRemotePrefix, remoteKeys } from '../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('the shared remote layout', () => {
  it('puts value, lock and channel in one hash tag and escapes braces in keys', () => {
    expect(remoteKeys('stampede:', 'a{b}c')).toEqual({
      value: 'stampede:{a%7Bb%7Dc}',
      lock: 'stampede:{a%7Bb%7Dc}:lock',
      channel: 'stampede:{a%7Bb%7Dc}:done',
    });
    expect(remoteKeys('p:', '%7B').value).not.toBe(remoteKeys('p:', '{').value);
  });

  it('keeps keys that differ only in lone surrogates apart (UTF-8 would fold both into U+FFFD)', () => {
    const a = remoteKeys('p:', 'user:\uD800').value;
    const b = remoteKeys('p:', 'user:\uDC00').value;
    expect(a).toBe('p:{user:%uD800}');
    expect(b).toBe('p:{user:%uDC00}');
    expect(remoteKeys('p:', 'pair:\uD83D\uDE80').value).toBe('p:{pair:\uD83D\uDE80}');
    expect(remoteKeys('p:', '%uD800').value).toBe('p:{%25uD800}');
  });

  it('refuses a prefix that opens an empty hash tag', () => {
    expect(() => checkRemotePrefix('app{}:')).toThrow(RangeError);
    expect(() => checkRemotePrefix('app{1}:')).not.toThrow();
  });
});

describe('stored values and write arguments', () => {
  it('reads nothing and tombstones as misses, and encodes entries for the write guard', async () => {
    const { decodeStored, tombstone, writeGuardArgs } = await import('../src/index.js');
    const entry = { value: { n: 1 }, createdAt: 1_000.4, freshUntil: 2_000, staleUntil: 3_000 };
    expect(decodeStored(null)).toBeUndefined();
    expect(decodeStored(undefined)).toBeUndefined();
    expect(decodeStored(tombstone(5_000))).toBeUndefined();
    expect(tombstone(5_000)).toBe('t|5000');
    expect(decodeStored(encodeEnvelope(entry))?.value).toEqual({ n: 1 });
    expect(() => decodeStored('garbage')).toThrow(TypeError);
    expect(writeGuardArgs(entry, 0)).toBeUndefined();
    expect(writeGuardArgs(entry, 1_500.2)).toEqual({
      text: encodeEnvelope(entry),
      createdAt: '1000',
      px: '1501',
    });
    expect(writeGuardArgs(entry, undefined)?.px).toBe('');
    expect(() => writeGuardArgs({ ...entry, value: 1n }, 10)).toThrow(TypeError);
  });

  it('a decoded entry moved to the local clock keeps the fixed shape of core entries', async () => {
    const { decodeStored } = await import('../src/index.js');
    const entry = {
      value: 'v',
      createdAt: 1_000,
      freshUntil: 2_000,
      staleUntil: 3_000,
      delta: 5,
      tags: ['t'],
    };
    const decoded = decodeStored(encodeEnvelope(entry), undefined, 100);
    // Built by core's changeEntry, not by spreading: same keys, same order (see core's entry.ts).
    expect(decoded).toStrictEqual({ ...entry, createdAt: 900, freshUntil: 1_900, staleUntil: 2_900 });
    expect(Object.keys(decoded ?? {})).toEqual([
      'value',
      'createdAt',
      'freshUntil',
      'staleUntil',
      'delta',
      'tags',
    ]);
  });
});

describe('remoteWriteArgs', () => {
  const entry = { value: 'v', createdAt: 10_000, freshUntil: 70_000, staleUntil: 80_000 };

  it('moves the times to the server clock and back, exactly', async () => {
    const { decodeStored, remoteWriteArgs } = await import('../src/index.js');
    const args = remoteWriteArgs(entry, 70_000, { offset: 300_000, tombstoneTtl: 5_000, now: 10_000 });
    expect(args).toEqual({ text: 's1|310000|370000|380000|"v"', createdAt: '310000', px: '70000' });
    expect(decodeStored(args.text, undefined, 300_000)).toEqual(entry);
    expect(decodeStored(args.text, undefined, -300_000)?.createdAt).toBe(610_000);
  });

  it("keeps an entry's delta through the clock shift: it is a duration, not a time", async () => {
    const { decodeStored, remoteWriteArgs } = await import('../src/index.js');
    const timed = { ...entry, delta: 250 };
    const args = remoteWriteArgs(timed, 70_000, { offset: 300_000, tombstoneTtl: 5_000, now: 10_000 });
    expect(args).toEqual({ text: 's2|310000|370000|380000|250|"v"', createdAt: '310000', px: '70000' });
    expect(decodeStored(args.text, undefined, 300_000)).toEqual(timed);
    expect(decodeStored(args.text, undefined, -300_000)).toMatchObject({ createdAt: 610_000, delta: 250 });
    // An envelope of the first release (no delta) still reads, shifted, without one.
    expect(decodeStored('s1|310000|370000|380000|"v"', undefined, 300_000)).toEqual(entry);
  });

  it("a renewal (fail-safe's re-arm) stores createdAt as it was read, though the offset moved since", async () => {
    const { changeEntry } = await import('@stampede/core/adapter');
    const { decodeStored, remoteWriteArgs } = await import('../src/index.js');
    const stored = 's1|310000|370000|380000|"v"';
    // Read when the estimate was 300,000 ms; written back after it moved to 300,007.
    const read = decodeStored(stored, undefined, 300_000);
    if (read === undefined) throw new Error('expected an entry');
    const renewed = changeEntry(read, { freshUntil: 90_000, staleUntil: 95_000 });
    const options = { offset: 300_007, tombstoneTtl: 5_000, now: 10_000 };
    expect(remoteWriteArgs(renewed, 70_000, { ...options, renews: read })).toEqual({
      text: 's1|310000|390007|395007|"v"',
      createdAt: '310000',
      px: '70000',
    });
    // Without `renews` the estimate converts it: 7 ms later than the fill it renews.
    expect(remoteWriteArgs(renewed, 70_000, options).createdAt).toBe('310007');
    // An entry with another createdAt is not a renewal of `read`, whatever the caller says; nor is
    // the renewal of an entry this module did not decode.
    const refilled = changeEntry(renewed, { createdAt: 20_000 });
    expect(remoteWriteArgs(refilled, 70_000, { ...options, renews: read }).createdAt).toBe('320007');
    expect(remoteWriteArgs(renewed, 70_000, { ...options, renews: { ...read } }).createdAt).toBe('310007');
  });

  it('is a removal (a tombstone at createdAt) for a ttl of 0 or an entry already past staleUntil', async () => {
    const { remoteWriteArgs } = await import('../src/index.js');
    const removal = { text: '', createdAt: '10000', px: '5000' };
    expect(remoteWriteArgs(entry, 0, { tombstoneTtl: 5_000, now: 10_000 })).toEqual(removal);
    expect(remoteWriteArgs(entry, 70_000, { tombstoneTtl: 5_000, now: 80_000 })).toEqual(removal);
    expect(remoteWriteArgs(entry, 70_000, { tombstoneTtl: 5_000, now: 79_999 }).text).not.toBe('');
    // A value the serializer cannot carry is refused whatever the ttl.
    expect(() => remoteWriteArgs({ ...entry, value: 1n }, 0, { tombstoneTtl: 5_000 })).toThrow(TypeError);
  });

  it('stores a physical ttl beyond PX range without PX, and writes huge times as digits', async () => {
    const { MAX_PX, pxArgument, remoteWriteArgs } = await import('../src/index.js');
    const huge = { ...entry, freshUntil: 1e21, staleUntil: Number.MAX_VALUE };
    const args = remoteWriteArgs(huge, 1e21, { tombstoneTtl: 5_000, now: 10_000 });
    expect(args.px).toBe('');
    expect(args.text).toMatch(/^s1\|10000\|1000000000000000000000\|\d{309}\|"v"$/);
    expect(remoteWriteArgs(huge, MAX_PX, { tombstoneTtl: 5_000, now: 10_000 }).px).toBe(String(MAX_PX));
    expect(remoteWriteArgs(huge, MAX_PX + 2, { tombstoneTtl: 5_000, now: 10_000 }).px).toBe('');
    expect(pxArgument(1e21)).toBe(String(MAX_PX));
    expect(pxArgument(0.2)).toBe('1');
    expect(pxArgument(1_500.2)).toBe('1501');
  });
});

describe('createServerClock', () => {
  it('measures on first use, then answers synchronously and refreshes in the background', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    let serverAhead = 300_000;
    const read = vi.fn(async () => Date.now() + serverAhead);
    const clock = createServerClock(read, { refreshInterval: 10_000 });
    expect(clock.offset).toBeUndefined();
    const first = clock.current();
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe(300_000);
    expect(clock.current()).toBe(300_000);
    expect(read).toHaveBeenCalledTimes(1);
    // Within the interval: no measurement. After it: one, in the background.
    vi.advanceTimersByTime(9_999);
    expect(clock.current()).toBe(300_000);
    expect(read).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1);
    serverAhead = 300_000 + 60_000; // this machine's clock was stepped back a minute
    expect(clock.current()).toBe(300_000);
    expect(read).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(0);
    expect(clock.current()).toBe(360_000);
  });

  it('keeps its estimate while measurements allow it, and moves it when one proves it wrong', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    let answer = (): number => Date.now() + 5_000;
    let roundTrip = 8;
    const clock = createServerClock(
      async () => {
        const server = answer();
        await new Promise((resolve) => setTimeout(resolve, roundTrip));
        return server;
      },
      { refreshInterval: 1 },
    );
    const first = clock.current();
    await vi.advanceTimersByTimeAsync(8);
    // The server answered at the start of an 8 ms round trip: the offset lies in [4991, 5001].
    expect(await first).toBe(4_996);
    // Jitter within what is proven does not move it (so times read back exactly as written)...
    answer = () => Date.now() + 5_004;
    clock.current();
    await vi.advanceTimersByTimeAsync(8);
    expect(clock.offset).toBe(4_996);
    // ...a tight measurement that excludes it does: [4998, 5002] proven, estimate 5000.
    roundTrip = 2;
    answer = () => Date.now() + 5_001;
    clock.current();
    await vi.advanceTimersByTimeAsync(2);
    expect(clock.offset).toBe(5_000);
    // And one that contradicts everything (the clock was stepped) starts afresh.
    answer = () => Date.now() + 65_000;
    clock.current();
    await vi.advanceTimersByTimeAsync(2);
    expect(clock.offset).toBe(64_999);
  });

  it('gives an offset never ahead of the server (floor) and one never behind it (ceiling), let out for drift', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    const clock = createServerClock(async () => {
      const server = Date.now() + 5_000;
      await new Promise((resolve) => setTimeout(resolve, 8));
      return server;
    });
    expect([clock.floor, clock.ceiling]).toEqual([undefined, undefined]);
    const first = clock.current();
    await vi.advanceTimersByTimeAsync(8);
    await first;
    // [4991, 5001] proven; the middle is 4996, wherever in the round trip the server read its time.
    // Each bound is let out by a millisecond at least for drift, so that it holds still between
    // measurements (two writes of one createdAt must stamp it alike).
    expect([clock.floor, clock.offset, clock.ceiling]).toEqual([4_990, 4_996, 5_002]);
    vi.advanceTimersByTime(5_000);
    expect([clock.floor, clock.ceiling]).toEqual([4_990, 5_002]);
    // 100 ppm of drift: 20 s later each bound has moved out by two milliseconds.
    vi.advanceTimersByTime(15_000);
    expect([clock.floor, clock.ceiling]).toEqual([4_989, 5_003]);
  });

  it('measures again within 250 ms while a slow first round trip leaves it uncertain', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    let roundTrip = 200;
    const read = vi.fn(async () => {
      const server = Date.now() + 1_000;
      await new Promise((resolve) => setTimeout(resolve, roundTrip));
      return server;
    });
    const clock = createServerClock(read, { refreshInterval: 10_000 });
    const first = clock.current();
    await vi.advanceTimersByTimeAsync(200);
    // A 200 ms round trip proves only [799, 1001]: the estimate is its low end, never ahead of the
    // server (its middle would be if the server had read its time at the end).
    expect(await first).toBe(799);
    // 250 ms after that measurement started (it took 200 of them), not before.
    vi.advanceTimersByTime(49);
    clock.current();
    expect(read).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1);
    roundTrip = 2;
    clock.current();
    expect(read).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(2);
    // [997, 1001] excludes 799: the estimate moves to the middle of what is proven.
    expect(clock.offset).toBe(999);
    // Now certain within a few ms: back to the normal refresh interval.
    vi.advanceTimersByTime(5_000);
    clock.current();
    expect(read).toHaveBeenCalledTimes(2);
  });

  it('after a slow round trip, never estimates above the true offset, wherever the server read its time', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    // Fake timers run a 0 ms timer 1 ms later: a wait of 0 is no timer at all.
    const sleep = async (ms: number): Promise<void> => {
      if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    };
    for (const waitBefore of [0, 1, 37, 80, 150, 159, 160]) {
      // A cold connection can hold the request most of a 160 ms round trip before Redis reads TIME:
      // the round trip's middle would then be up to 80 ms ahead of the truth.
      const clock = createServerClock(async () => {
        await sleep(waitBefore);
        const server = Date.now() + 2_000;
        await sleep(160 - waitBefore);
        return server;
      });
      const first = clock.current();
      await vi.advanceTimersByTimeAsync(161);
      const estimate = await first;
      expect(estimate).toBeLessThanOrEqual(2_000);
      expect(estimate).toBe(2_000 + waitBefore - 160 - 1);
    }
  });

  it('uses this clock (0) when the first measurement fails, and tries again later', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { createServerClock } = await import('../src/index.js');
    let fail = true;
    const read = vi.fn(async () => {
      if (fail) throw new Error('down');
      return Date.now() + 7;
    });
    const clock = createServerClock(read, { retryAfter: 1_000 });
    expect(await clock.current()).toBe(0);
    expect(clock.current()).toBe(0);
    expect(read).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1_000);
    fail = false;
    expect(await clock.current()).toBe(7);
    expect(read).toHaveBeenCalledTimes(2);
  });
});

describe('busChannel', () => {
  it('is <prefix>bus, never a name of a key', () => {
    expect(busChannel('stampede:')).toBe('stampede:bus');
    for (const key of ['bus', '}bus', 'b']) {
      const names = Object.values(remoteKeys('stampede:', key));
      expect(names).not.toContain(busChannel('stampede:'));
    }
    // No key is empty (it would be the empty hash tag `{}`).
    expect(() => remoteKeys('stampede:', '')).toThrow(TypeError);
  });
});
