import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createOperationRunner,
  createScriptRunner,
  hasRedisProtocolErrorShape,
  isRedisProtocolError,
  isRedisProtocolErrorOf,
  onClientEnd,
  parseRedisProtocolOptions,
  type RedisProtocolClient,
  RedisProtocolError,
  type RedisProtocolErrorCode,
  type RedisProtocolErrorOptions,
} from '../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

class BindingError extends RedisProtocolError {
  constructor(code: RedisProtocolErrorCode, message: string, options?: RedisProtocolErrorOptions) {
    super(code, message, options);
    this.name = 'BindingError';
  }
}

const createError = (code: RedisProtocolErrorCode, message: string, options?: RedisProtocolErrorOptions) =>
  new BindingError(code, message, options);

describe('errors', () => {
  it('carry one E_STAMPEDE_BACKEND_* code, the key and the cause, and are recognised across copies', () => {
    const cause = new Error('x');
    const error = createError('E_STAMPEDE_BACKEND_ENCODE', 'cannot serialise', { key: 'k', cause });
    expect(error).toMatchObject({ name: 'BindingError', code: 'E_STAMPEDE_BACKEND_ENCODE', key: 'k', cause });
    expect(isRedisProtocolError(error)).toBe(true);
    const copy = Object.assign(new Error('m'), { name: 'BindingError', code: 'E_STAMPEDE_BACKEND_TIMEOUT' });
    expect(hasRedisProtocolErrorShape(copy, 'BindingError')).toBe(true);
    expect(hasRedisProtocolErrorShape(copy, 'OtherError')).toBe(false);
    expect(
      hasRedisProtocolErrorShape({ name: 'BindingError', code: 'STAMPEDE_REDIS_TIMEOUT' }, 'BindingError'),
    ).toBe(false);
    expect(isRedisProtocolError(new Error('m'))).toBe(false);
    expect(isRedisProtocolError(null)).toBe(false);
  });

  it('type guards answer false for a Proxy whose traps throw, instead of throwing', () => {
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
    expect(isRedisProtocolError(hostile)).toBe(false);
    expect(hasRedisProtocolErrorShape(hostile, 'BindingError')).toBe(false);
    expect(isRedisProtocolErrorOf(hostile, RedisProtocolError, 'BindingError')).toBe(false);
  });
});

describe('parseRedisProtocolOptions', () => {
  it('applies the defaults every binding shares, with the binding name', () => {
    const parsed = parseRedisProtocolOptions({}, 'binding');
    expect(parsed).toMatchObject({
      prefix: 'stampede:',
      name: 'binding',
      operationTimeout: 1_000,
      tombstoneTtl: 10_000,
    });
    expect(parsed.serializer.stringify({ a: 1 })).toBe('{"a":1}');
    expect(
      parseRedisProtocolOptions({ operationTimeout: '250ms', tombstoneTtl: '1m', prefix: '' }, 'b'),
    ).toMatchObject({
      prefix: '',
      operationTimeout: 250,
      tombstoneTtl: 60_000,
    });
  });

  it('names the option at fault', () => {
    const parse = (options: object) => () => parseRedisProtocolOptions(options, 'b');
    expect(parse({ prefix: 1 })).toThrow(/options\.prefix must be a string; got number/);
    expect(parse({ prefix: 'x{}:' })).toThrow(RangeError);
    expect(parse({ name: '' })).toThrow(/options\.name/);
    expect(parse({ serializer: {} })).toThrow(/options\.serializer/);
    expect(parse({ operationTimeout: 0 })).toThrow(RangeError);
    expect(parse({ operationTimeout: 'soon' })).toThrow(/options\.operationTimeout/);
    expect(parse({ tombstoneTtl: -5 })).toThrow(/options\.tombstoneTtl/);
  });
});

describe('createOperationRunner', () => {
  it('turns a time-out into the binding error and tells a late result to onLate', async () => {
    vi.useFakeTimers();
    const runner = createOperationRunner({ name: 'b', label: 'kv', operationTimeout: 100, createError });
    const late = vi.fn();
    const caught = runner
      .call('get', 'k', () => new Promise((resolve) => setTimeout(() => resolve('OK'), 500)), late)
      .catch((error: unknown) => error);
    await vi.advanceTimersByTimeAsync(100);
    const error = await caught;
    expect(error).toBeInstanceOf(BindingError);
    expect(error).toMatchObject({
      code: 'E_STAMPEDE_BACKEND_TIMEOUT',
      key: 'k',
      message: 'kv get did not answer within 100ms',
    });
    await vi.advanceTimersByTimeAsync(400);
    expect(late).toHaveBeenCalledWith('OK');
  });

  it('rejects for a command that throws at once, after mapping the error', async () => {
    const mapError = vi.fn((error: unknown) => Object.assign(error as Error, { mapped: true }));
    const runner = createOperationRunner({
      name: 'b',
      label: 'kv',
      operationTimeout: 100,
      createError,
      mapError,
    });
    const error = await runner
      .call('set', 'k', () => {
        throw new Error('sync');
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ message: 'sync', mapped: true });
  });

  it('hands requests to waitUntil, and survives a waitUntil that throws', async () => {
    const kept: Promise<unknown>[] = [];
    const runner = createOperationRunner({
      name: 'b',
      label: 'kv',
      operationTimeout: 100,
      createError,
      waitUntil: (promise) => kept.push(promise),
    });
    await expect(runner.keepAlive(Promise.resolve(1))).resolves.toBe(1);
    expect(kept).toHaveLength(1);
    const throwing = createOperationRunner({
      name: 'b',
      label: 'kv',
      operationTimeout: 100,
      createError,
      waitUntil: () => {
        throw new Error('outside a request');
      },
    });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await expect(throwing.keepAlive(Promise.resolve(2))).resolves.toBe(2);
      await expect(throwing.keepAlive(Promise.resolve(3))).resolves.toBe(3);
      // Nothing keeps the requests alive after the response: said once for the cache.
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(
        /^stampede: options\.waitUntil of cache 'b' threw \(outside a request\): its requests are not kept alive after the response\. Pass the platform's waitUntil bound to its object/,
      );
    } finally {
      warn.mockRestore();
    }
  });
});

describe('the script runner on edge runtimes', () => {
  it('never makes one call await a SHA-1 another call is still computing, and keeps it once known', async () => {
    // On workerd a request must not await a promise that another request's work settles: each call
    // computes the digest until one has finished, and every later call uses the finished one.
    const digests: ((sha: string) => void)[] = [];
    const evalshas: string[] = [];
    const client: RedisProtocolClient = {
      get: async () => null,
      setIfAbsent: async () => 'OK',
      eval: async () => 'eval',
      evalsha: async (sha) => {
        evalshas.push(sha);
        return 'evalsha';
      },
      sha1: () =>
        new Promise<string>((resolve) => {
          digests.push(resolve);
        }),
    };
    const run = createScriptRunner(client);
    const first = run({ source: 'return 1' }, [], []);
    const second = run({ source: 'return 1' }, [], []);
    await Promise.resolve();
    expect(digests).toHaveLength(2);
    digests[1]?.('sha-b');
    await expect(second).resolves.toBe('evalsha');
    expect(evalshas).toEqual(['sha-b']);
    digests[0]?.('sha-a');
    await expect(first).resolves.toBe('evalsha');
    await expect(run({ source: 'return 1' }, [], [])).resolves.toBe('evalsha');
    expect(digests).toHaveLength(2);
  });
});

describe('onClientEnd', () => {
  it("keeps one 'end' listener on the client however many register, and calls each registration", () => {
    const client = new EventEmitter();
    const calls: string[] = [];
    const stops = Array.from({ length: 12 }, (_, i) => onClientEnd(client, () => calls.push(`l${i}`)));
    const same = () => calls.push('twice');
    const stopTwiceA = onClientEnd(client, same);
    const stopTwiceB = onClientEnd(client, same);
    expect(client.listenerCount('end')).toBe(1);
    stops[3]?.();
    stops[3]?.(); // idempotent: does not remove another registration
    stopTwiceA();
    client.emit('end');
    expect(calls).toEqual([
      ...Array.from({ length: 12 }, (_, i) => `l${i}`).filter((l) => l !== 'l3'),
      'twice',
    ]);
    for (const stop of stops) stop();
    expect(client.listenerCount('end')).toBe(1);
    stopTwiceB();
    expect(client.listenerCount('end')).toBe(0);
    // A client whose registrations all left takes new ones again.
    const stop = onClientEnd(client, () => calls.push('again'));
    client.emit('end');
    expect(calls.at(-1)).toBe('again');
    stop();
    expect(client.listenerCount('end')).toBe(0);
  });

  it('a throwing listener does not keep the others from running; a listener may stop itself', () => {
    const client = new EventEmitter();
    const calls: string[] = [];
    onClientEnd(client, () => {
      throw new Error('boom');
    });
    const stopSelf: () => void = onClientEnd(client, () => {
      calls.push('self');
      stopSelf();
    });
    onClientEnd(client, () => calls.push('last'));
    client.emit('end');
    client.emit('end');
    expect(calls).toEqual(['self', 'last', 'last']);
  });
});
