// What is thrown is user code: reading it (a `message` getter, a Proxy's traps, a `then` getter)
// can throw again, inside the code that is handling the first error. Found by an outside review: a
// fill that threw such a value left every caller waiting forever, `fillTimeout` or not, and a
// listener's could fail the request that emitted the event or end the process.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { messageOf } from '../src/errors.js';
import {
  CACHE_BUS_ERROR_CODE,
  CacheBusError,
  CacheFillError,
  getOrComputeWith,
  isCacheBusError,
  isCacheFillError,
  onStampedeEvent,
} from '../src/index.js';
import { testCache } from './helpers.js';

class UnreadableMessage extends Error {
  override get message(): string {
    throw new Error('the message getter failed');
  }
}

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const unreadable: ReadonlyArray<readonly [string, () => unknown]> = [
  ['an Error whose message getter throws', () => new UnreadableMessage()],
  ['a revoked Proxy', revokedProxy],
];

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('a thrown value that cannot be read', () => {
  it.each(unreadable)('messageOf answers for %s instead of throwing', (_label, make) => {
    expect(messageOf(make())).toBe('an error whose message could not be read');
  });

  it.each(unreadable)('a fill that throws %s settles every caller', async (_label, make) => {
    const cache = testCache();
    const thrown = make();
    const fill = async () => {
      await null;
      throw thrown;
    };
    const results = await Promise.allSettled([
      getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill),
      getOrComputeWith(cache, 'k', { ttl: 60_000 }, fill),
    ]);
    const [leader, joined] = results.map((r) => (r.status === 'rejected' ? r.reason : r.value));
    expect(isCacheFillError(leader)).toBe(true);
    expect(leader).toMatchObject({ kind: 'fill', message: 'an error whose message could not be read' });
    expect((leader as CacheFillError).cause).toBe(thrown);
    expect(joined).toMatchObject({ kind: 'fill_failed' });
    // Nothing was cached and the key is not stuck: the next call fills.
    await expect(getOrComputeWith(cache, 'k', { ttl: 60_000 }, () => 'ok')).resolves.toBe('ok');
  });

  it.each(unreadable)(
    'a synchronous throw of %s settles the caller, with fillTimeout',
    async (_label, make) => {
      vi.useFakeTimers();
      const cache = testCache();
      const answer = getOrComputeWith(cache, 'k', { ttl: 60_000, fillTimeout: 100 }, () => {
        throw make();
      });
      const settled = vi.fn();
      answer.then(settled, settled);
      await vi.advanceTimersByTimeAsync(0);
      expect(settled).toHaveBeenCalledTimes(1);
      await expect(answer).rejects.toBeInstanceOf(CacheFillError);
    },
  );
});

describe('a listener whose failure cannot be read', () => {
  it('a returned value whose then getter throws fails neither the request nor the listener list', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const seen: string[] = [];
    // An object whose `then` getter throws (defined, not written literally: a literal `then` is a lint error).
    const returned = Object.defineProperty({}, 'then', {
      get() {
        throw new Error('then getter');
      },
    });
    const offBad = onStampedeEvent(() => returned as unknown as undefined);
    const offGood = onStampedeEvent((event) => {
      seen.push(event.type);
    });
    try {
      const cache = testCache();
      for (let i = 0; i < 3; i++) {
        await expect(getOrComputeWith(cache, `k${i}`, { ttl: 60_000 }, () => i)).resolves.toBe(i);
      }
      expect(seen.filter((type) => type === 'fill')).toHaveLength(3);
      const lines = warn.mock.calls.map((call) => String(call[0]));
      expect(lines.filter((line) => line.includes('then getter'))).toHaveLength(1);
    } finally {
      offBad();
      offGood();
    }
  });

  it.each(unreadable)('a listener that throws %s fails no request', async (_label, make) => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const off = onStampedeEvent(() => {
      throw make();
    });
    try {
      await expect(getOrComputeWith(testCache(), 'k', { ttl: 60_000 }, () => 1)).resolves.toBe(1);
      expect(warn.mock.calls.map((call) => String(call[0])).join('\n')).toContain(
        'an error whose message could not be read',
      );
    } finally {
      off();
    }
  });

  it.each(unreadable)(
    'an async listener that rejects with %s leaves no unhandled rejection',
    async (_label, make) => {
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
      const unhandled = vi.fn();
      process.on('unhandledRejection', unhandled);
      const off = onStampedeEvent(async () => {
        await null;
        throw make();
      });
      try {
        await expect(getOrComputeWith(testCache(), 'k', { ttl: 60_000 }, () => 1)).resolves.toBe(1);
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(unhandled).not.toHaveBeenCalled();
        expect(warn).toHaveBeenCalledTimes(1);
      } finally {
        off();
        process.off('unhandledRejection', unhandled);
      }
    },
  );
});

describe('CacheBusError', () => {
  it('is exported with its code and a guard that works across copies', () => {
    const error = new CacheBusError('bus down', { cause: new Error('publish failed') });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('CacheBusError');
    expect(error.code).toBe(CACHE_BUS_ERROR_CODE);
    expect(CACHE_BUS_ERROR_CODE).toBe('E_STAMPEDE_BUS_UNHEARD');
    expect(isCacheBusError(error)).toBe(true);
    // Another copy of the package: same name and code, another class.
    const other = Object.assign(new Error('x'), { name: 'CacheBusError', code: CACHE_BUS_ERROR_CODE });
    expect(isCacheBusError(other)).toBe(true);
    expect(isCacheBusError(Object.assign(new Error('x'), { code: CACHE_BUS_ERROR_CODE }))).toBe(false);
    expect(isCacheBusError(new CacheFillError('fill', 'k', 'x'))).toBe(false);
    expect(isCacheFillError(error)).toBe(false);
    for (const value of [undefined, null, 'CacheBusError', revokedProxy()]) {
      expect(isCacheBusError(value)).toBe(false);
    }
  });
});
