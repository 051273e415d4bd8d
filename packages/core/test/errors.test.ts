import { describe, expect, it } from 'vitest';
import { CACHE_FILL_ERROR_CODE, CacheFillError, isCacheFillError } from '../src/index.js';

describe('CacheFillError', () => {
  it('carries kind, key, code and cause', () => {
    const cause = new Error('db');
    const error = new CacheFillError('fill', 'k', 'db', { cause });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('CacheFillError');
    expect(error.code).toBe(CACHE_FILL_ERROR_CODE);
    expect(error.intoFill()).toBe(cause);
    expect(new CacheFillError('fill_failed', 'k', 'db').intoFill()).toBeUndefined();
    expect(new CacheFillError('timeout', 'k', 'slow', { cause }).intoFill()).toBeUndefined();
  });

  it('isCacheFillError works across duplicate copies of the package (by name and code)', () => {
    class ForeignCacheFillError extends Error {
      override name = 'CacheFillError';
      code = CACHE_FILL_ERROR_CODE;
      kind = 'fill_failed';
    }
    expect(isCacheFillError(new ForeignCacheFillError('x'))).toBe(true);
    expect(isCacheFillError(new CacheFillError('fill', 'k', 'x'))).toBe(true);
    expect(isCacheFillError(new Error('x'))).toBe(false);
    expect(isCacheFillError({ name: 'CacheFillError' })).toBe(false);
    expect(isCacheFillError(null)).toBe(false);
    expect(isCacheFillError('CacheFillError')).toBe(false);
    // A type guard answers, whatever it is given.
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
        getPrototypeOf() {
          throw new Error('trap');
        },
      },
    );
    expect(isCacheFillError(hostile)).toBe(false);
  });
});
