import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { deferred, waitFor } from '../src/wait.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('waitFor', () => {
  it("returns the condition's first truthy value, sync or async", async () => {
    expect(await waitFor(() => 'ready')).toBe('ready');
    expect(await waitFor(async () => ({ n: 1 }))).toEqual({ n: 1 });
  });

  it('polls every interval until the condition holds', async () => {
    let polls = 0;
    const waiting = waitFor(() => ++polls >= 3 && polls, { interval: 100 });
    await vi.advanceTimersByTimeAsync(200);
    expect(await waiting).toBe(3);
    expect(polls).toBe(3);
  });

  it('fails at the deadline with what it waited for and the last value', async () => {
    let polls = 0;
    const waiting = waitFor(
      () => {
        polls++;
        return 0;
      },
      { timeout: 1_000, interval: 100, message: 'the registry to empty' },
    );
    const failed = expect(waiting).rejects.toThrow(
      'waitFor: timed out after 1000 ms waiting for the registry to empty (last value: 0)',
    );
    await vi.advanceTimersByTimeAsync(1_000);
    await failed;
    expect(polls).toBe(11);
  });

  it('polls again after a condition that throws, and keeps the last error as the cause', async () => {
    const boom = new Error('not yet');
    const waiting = waitFor(
      () => {
        throw boom;
      },
      { timeout: 50, interval: 10 },
    );
    const failed = expect(waiting).rejects.toMatchObject({
      message: 'waitFor: timed out after 50 ms waiting for the condition (last poll threw)',
      cause: boom,
    });
    await vi.advanceTimersByTimeAsync(50);
    await failed;
  });
});

describe('deferred', () => {
  it('settles its promise when the test says so', async () => {
    const value = deferred<string>();
    value.resolve('filled');
    expect(await value.promise).toBe('filled');
    const error = deferred<never>();
    const reason = new Error('failed');
    error.reject(reason);
    await expect(error.promise).rejects.toBe(reason);
  });
});
