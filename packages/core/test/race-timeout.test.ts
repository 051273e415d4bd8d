import { afterEach, describe, expect, it, vi } from 'vitest';
import { raceTimeout } from '../src/adapter.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('raceTimeout', () => {
  it('rejects a time that is not a number of ms (NaN would time out at once) and an onTimeout that is no function', async () => {
    const command = new Promise<string>(() => {});
    for (const ms of [Number.NaN, -1, undefined, '50']) {
      await expect(raceTimeout(command, ms as number, () => new Error('late'))).rejects.toThrow(
        new RangeError(`ms must be a number of milliseconds, 0 or more; got ${String(ms)}`),
      );
    }
    await expect(raceTimeout(command, 50, 'late' as never)).rejects.toThrow(TypeError);
  });

  it('rejects on time and tells a late success to onLate', async () => {
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
