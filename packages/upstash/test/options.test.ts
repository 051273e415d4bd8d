import { Redis } from '@upstash/redis';
import { describe, expect, it } from 'vitest';
import { createUpstashCache, type UpstashCacheOptions } from '../src/index.js';

// Constructing a client sends nothing: these tests never reach a server.
const client = new Redis({ url: 'http://127.0.0.1:1', token: 't', enableTelemetry: false });

function create(options: unknown) {
  return () => createUpstashCache(options as UpstashCacheOptions);
}

describe('createUpstashCache options', () => {
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
