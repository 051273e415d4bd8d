import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isRedisCacheError } from '../src/index.js';
import { withTimeout } from '../src/timeout.js';

describe('withTimeout', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers with the command when it settles in time', async () => {
    const answer = withTimeout(
      new Promise((resolve) => setTimeout(() => resolve('OK'), 50)),
      100,
      'get',
      'k',
    );
    await vi.advanceTimersByTimeAsync(50);
    await expect(answer).resolves.toBe('OK');
  });

  it('passes the command error through', async () => {
    await expect(withTimeout(Promise.reject(new Error('boom')), 100, 'get', 'k')).rejects.toThrow('boom');
  });

  it('rejects with an E_STAMPEDE_BACKEND_TIMEOUT error after the limit, and reports a late result', async () => {
    const late = vi.fn();
    const answer = withTimeout(
      new Promise((resolve) => setTimeout(() => resolve('OK'), 500)),
      100,
      'lock',
      'k',
      late,
    );
    const caught = answer.catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(100);
    const error = await caught;
    expect(isRedisCacheError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'E_STAMPEDE_BACKEND_TIMEOUT', key: 'k' });
    expect(late).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(400);
    expect(late).toHaveBeenCalledWith('OK');
  });

  it('ignores a late rejection', async () => {
    const answer = withTimeout(
      new Promise((_, reject) => setTimeout(() => reject(new Error('late')), 500)),
      100,
      'get',
      undefined,
    );
    const caught = answer.catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(600);
    expect(await caught).toMatchObject({ code: 'E_STAMPEDE_BACKEND_TIMEOUT' });
  });
});
