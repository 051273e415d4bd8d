import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkRemotePrefix, raceTimeout, remoteKeys } from '../src/index.js';

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

  it('raceTimeout rejects on time and tells a late success to onLate', async () => {
    vi.useFakeTimers();
    let finish!: (value: string) => void;
    const command = new Promise<string>((resolve) => {
      finish = resolve;
    });
    const late = vi.fn();
    const raced = raceTimeout(command, 100, () => new Error('slow'), late).catch((e: Error) => e.message);
    await vi.advanceTimersByTimeAsync(100);
    expect(await raced).toBe('slow');
    finish('eventually');
    await vi.advanceTimersByTimeAsync(0);
    expect(late).toHaveBeenCalledWith('eventually');
    await expect(raceTimeout(Promise.resolve(1), 100, () => new Error('x'))).resolves.toBe(1);
  });
});

describe('stored values and write arguments', () => {
  it('reads nothing and tombstones as misses, and encodes entries for the write guard', async () => {
    const { decodeStored, tombstone, writeGuardArgs, encodeEnvelope } = await import('../src/index.js');
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
});
