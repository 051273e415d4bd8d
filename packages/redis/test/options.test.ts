import { hasFastProperties } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedisCache, isRedisCacheError, RedisCacheError } from '../src/index.js';

// A real client that never connects (lazyConnect): option checks need no server.
const client = new Redis({ lazyConnect: true });

afterAll(() => {
  client.disconnect();
});

describe('createRedisCache options', () => {
  it('has the documented defaults', () => {
    const cache = createRedisCache({ client });
    expect(cache.name).toBe('redis');
    expect(cache.prefix).toBe('stampede:');
    expect(cache.client).toBe(client);
    expect(typeof cache.tryAcquireFillLock).toBe('function');
    expect(typeof cache.onFillDone).toBe('function');
  });

  it('makes every cache object in V8 fast mode (no hash lookup to reach its methods)', () => {
    // The fill-lock members are accessors every cache shares (defineFillLockMembers): written in
    // the literal, or as a closure per cache, they kept the object in dictionary mode.
    const caches = [createRedisCache({ client }), createRedisCache({ client }), createRedisCache({ client })];
    expect(caches.map((cache) => hasFastProperties(cache))).toEqual([true, true, true]);
    expect(caches.map((cache) => typeof cache.tryAcquireFillLockAndRead)).toEqual([
      'function',
      'function',
      'function',
    ]);
  });

  it('rejects bad options, naming the field', () => {
    expect(() => createRedisCache(undefined as never)).toThrow(TypeError);
    expect(() => createRedisCache({ client: {} as never })).toThrow(/options.client/);
    expect(() => createRedisCache({ client, prefix: 1 as never })).toThrow(/options.prefix/);
    expect(() => createRedisCache({ client, prefix: 'x{}:' })).toThrow(RangeError);
    expect(() => createRedisCache({ client, name: '' })).toThrow(/options.name/);
    expect(() => createRedisCache({ client, serializer: {} as never })).toThrow(/options.serializer/);
    expect(() => createRedisCache({ client, operationTimeout: -1 })).toThrow(RangeError);
    expect(() => createRedisCache({ client, operationTimeout: 0 })).toThrow(/operationTimeout/);
    expect(() => createRedisCache({ client, tombstoneTtl: 'soon' as never })).toThrow(/tombstoneTtl/);
    expect(() => createRedisCache({ client, pushWakeUp: 'yes' as never })).toThrow(/pushWakeUp/);
    expect(() => createRedisCache({ client, lockClient: {} as never })).toThrow(/options.lockClient/);
    // A misspelt option would otherwise be ignored (locks silently on the values' server).
    expect(() => createRedisCache({ client, lockclient: client } as never)).toThrow(
      new TypeError("options.lockclient is not an option (did you mean 'lockClient'?)"),
    );
    expect(() => createRedisCache({ client, prefx: 'app:' } as never)).toThrow(
      /options\.prefx is not an option/,
    );
  });

  it('takes a lockClient, and leaves a lazyConnect client unconnected until the cache is used', () => {
    const lockClient = new Redis({ lazyConnect: true });
    try {
      const cache = createRedisCache({ client, lockClient });
      expect(cache.lockClient).toBe(lockClient);
      expect(createRedisCache({ client }).lockClient).toBe(client);
      expect([client.status, lockClient.status]).toEqual(['wait', 'wait']);
    } finally {
      lockClient.disconnect();
    }
  });

  it('accepts durations as strings', () => {
    expect(() => createRedisCache({ client, operationTimeout: '250ms', tombstoneTtl: '1m' })).not.toThrow();
  });
});

describe('isRedisCacheError', () => {
  it('recognises its own errors and copies from another package instance', () => {
    const cause = new Error('x');
    const error = new RedisCacheError('E_STAMPEDE_BACKEND_ENCODE', 'cannot serialise', { key: 'k', cause });
    expect(isRedisCacheError(error)).toBe(true);
    expect(error.cause).toBe(cause);
    const copy = Object.assign(new Error('m'), {
      name: 'RedisCacheError',
      code: 'E_STAMPEDE_BACKEND_TIMEOUT',
    });
    expect(isRedisCacheError(copy)).toBe(true);
    expect(isRedisCacheError(new Error('m'))).toBe(false);
    expect(isRedisCacheError({ name: 'RedisCacheError', code: 'OTHER' })).toBe(false);
    expect(isRedisCacheError(null)).toBe(false);
  });
});
