import { afterEach, describe, expect, it, vi } from 'vitest';
import { raceTimeout } from '../src/adapter.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('raceTimeout', () => {
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
