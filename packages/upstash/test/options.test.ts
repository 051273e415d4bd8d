import { hasFastProperties } from '@stampede/test-support';
import { Redis } from '@upstash/redis';
import { describe, expect, it, vi } from 'vitest';
import { createUpstashCache, type UpstashCacheOptions } from '../src/index.js';

// Constructing a client sends nothing: these tests never reach a server.
const client = new Redis({ url: 'http://127.0.0.1:1', token: 't', enableTelemetry: false });

function create(options: unknown) {
  return () => createUpstashCache(options as UpstashCacheOptions);
}

describe('createUpstashCache options', () => {
  it('makes every cache object in V8 fast mode (no hash lookup to reach its methods)', () => {
    // The fill-lock members are accessors every cache shares (defineFillLockMembers): written in
    // the literal, or as a closure per cache, they kept the object in dictionary mode.
    const caches = [
      createUpstashCache({ client }),
      createUpstashCache({ client }),
      createUpstashCache({ client }),
    ];
    expect(caches.map((cache) => hasFastProperties(cache))).toEqual([true, true, true]);
    expect(caches.map((cache) => typeof cache.tryAcquireFillLock)).toEqual([
      'function',
      'function',
      'function',
    ]);
  });

  it('needs an options object with a client', () => {
    expect(create(undefined)).toThrow(TypeError);
    expect(create({})).toThrow(/options\.client is required/);
    expect(create({ client: null })).toThrow(
      /options\.client must be a Redis from @upstash\/redis; got null/,
    );
  });

  it('an optional client given as null is named as such, not as missing', () => {
    expect(create({ client, lockClient: null })).toThrow(
      /options\.lockClient must be a Redis from @upstash\/redis; got null/,
    );
  });

  it('names options.client when it is the wrong type', () => {
    expect(create({ client: 'redis://localhost' })).toThrow(
      /options\.client must be a Redis from @upstash\/redis; got string/,
    );
    expect(create({ client: { get() {} } })).toThrow(/options\.client .*no set, eval, evalsha method/);
    const tcpClient = { get() {}, set() {}, eval() {}, evalsha() {}, duplicate() {} };
    expect(create({ client: tcpClient })).toThrow(/options\.client looks like a TCP Redis client/);
  });

  it('names the other options at fault', () => {
    expect(create({ client, prefix: 1 })).toThrow(/options\.prefix must be a string/);
    expect(create({ client, prefix: 'app\n' })).toThrow(
      new TypeError(
        "options.prefix must not contain a line break (CR or LF): Upstash's pub/sub is a line-based stream, so the prefix's channels (push wake-up, the invalidation bus) could not be heard",
      ),
    );
    expect(create({ client, prefix: 'app\r:' })).toThrow(/options\.prefix must not contain a line break/);
    expect(create({ client, name: '' })).toThrow(/options\.name/);
    expect(create({ client, serializer: {} })).toThrow(/options\.serializer/);
    expect(create({ client, operationTimeout: 'soon' })).toThrow(/options\.operationTimeout/);
    expect(create({ client, operationTimeout: 0 })).toThrow(RangeError);
    expect(create({ client, tombstoneTtl: -5 })).toThrow(/options\.tombstoneTtl/);
    expect(create({ client, pushWakeUp: 'yes' })).toThrow(/options\.pushWakeUp must be a boolean/);
  });

  it('names busLiveness and its fields at fault', () => {
    expect(create({ client, busLiveness: 'off' })).toThrow(
      new TypeError('options.busLiveness must be a boolean or { interval?, timeout? }; got string'),
    );
    expect(create({ client, busLiveness: null })).toThrow(/options\.busLiveness must be .*; got null/);
    expect(create({ client, busLiveness: [] })).toThrow(/options\.busLiveness must be .*; got array/);
    expect(create({ client, busLiveness: { intervall: 1_000 } })).toThrow(
      new TypeError("options.busLiveness.intervall is not an option (did you mean 'interval'?)"),
    );
    expect(create({ client, busLiveness: { interval: 0 } })).toThrow(
      new RangeError('options.busLiveness.interval must be at least 1ms; got 0'),
    );
    expect(create({ client, busLiveness: { interval: {} } })).toThrow(
      new TypeError(
        "options.busLiveness.interval must be a number of milliseconds or a string like '30s'; got object",
      ),
    );
    expect(create({ client, busLiveness: { timeout: 'soon' } })).toThrow(
      new RangeError(
        "options.busLiveness.timeout must look like '250ms', '30s', '5m', '2h' or '1d'; got 'soon'",
      ),
    );
    expect(create({ client, busLiveness: { timeout: -1 } })).toThrow(
      new RangeError(
        'options.busLiveness.timeout must be a finite, non-negative number of milliseconds; got -1',
      ),
    );
    expect(create({ client, busLiveness: { timeout: Number.NaN } })).toThrow(RangeError);
  });

  it('refuses a bad busLiveness before sending anything', async () => {
    /** A client that records the methods called, and never answers. */
    const recording = () => {
      const calls: string[] = [];
      const record = (method: string) => (): Promise<never> => {
        calls.push(method);
        return new Promise(() => {});
      };
      const methods = ['get', 'set', 'eval', 'evalsha', 'publish', 'subscribe'] as const;
      return { calls, client: Object.fromEntries(methods.map((method) => [method, record(method)])) };
    };
    const refused = recording();
    const accepted = recording();
    expect(create({ client: refused.client, busLiveness: { interval: '0s' } })).toThrow(RangeError);
    create({ client: accepted.client, busLiveness: { interval: '1s' } })();
    // The cache made sends its first request (the clock) at once; the refused one sent nothing.
    await vi.waitFor(() => expect(accepted.calls).not.toEqual([]));
    expect(refused.calls).toEqual([]);
  });

  it('takes busLiveness as a boolean or durations', () => {
    const values: UpstashCacheOptions['busLiveness'][] = [
      true,
      false,
      {},
      { interval: '1m' },
      { interval: 250, timeout: '2.5s' },
    ];
    for (const busLiveness of values) {
      expect(createUpstashCache({ client, busLiveness }).bus).toBeDefined();
    }
  });

  it('applies the defaults', () => {
    const cache = createUpstashCache({ client });
    expect(cache.prefix).toBe('stampede:');
    expect(cache.name).toBe('upstash');
    expect(cache.client).toBe(client);
    expect(typeof cache.tryAcquireFillLock).toBe('function');
    expect(createUpstashCache({ client, prefix: '', name: 'edge', operationTimeout: '250ms' }).prefix).toBe(
      '',
    );
  });
});
