import type { RedisProtocolCache } from './cache.js';

// A binding's `tryAcquireFillLock` and `tryAcquireFillLockAndRead` are withdrawn once Redis refuses
// a script (the lock could no longer be released), so they are accessors. Accessors every binding
// shares, reading the binding's own state from a slot of its own: V8 keeps an object in dictionary
// mode (every later read of its methods a hash lookup) when a literal holding an accessor makes it,
// and when an accessor is added that differs from the one added to an earlier object of the same
// shape (a closure made per cache): only the first cache made would be spared.
const LOCK = Symbol('@stampede/redis-protocol/lock');

/** The fill-lock members of a binding's `Cache`, as {@link defineFillLockMembers} adds them. */
export interface FillLockMembers {
  /** `SET NX PX` through the binding's cache while the lock can be used (`lockUsable`), else `undefined`. */
  readonly tryAcquireFillLock: RedisProtocolCache['tryAcquireFillLock'] | undefined;
  /** The lock attempt and a read in one round trip while the lock can be used, else `undefined`. */
  readonly tryAcquireFillLockAndRead: RedisProtocolCache['tryAcquireFillLockAndRead'] | undefined;
}

interface LockState {
  readonly cache: RedisProtocolCache;
  readonly tryAcquireFillLock: RedisProtocolCache['tryAcquireFillLock'];
  readonly tryAcquireFillLockAndRead: RedisProtocolCache['tryAcquireFillLockAndRead'];
}

type WithLock = { readonly [LOCK]?: LockState };

function tryAcquireFillLockOf(this: WithLock): FillLockMembers['tryAcquireFillLock'] {
  const state = this[LOCK];
  return state?.cache.lockUsable ? state.tryAcquireFillLock : undefined;
}

function tryAcquireFillLockAndReadOf(this: WithLock): FillLockMembers['tryAcquireFillLockAndRead'] {
  const state = this[LOCK];
  return state?.cache.lockUsable ? state.tryAcquireFillLockAndRead : undefined;
}

/**
 * Adds `tryAcquireFillLock` and `tryAcquireFillLockAndRead` to a binding's `target` (enumerable, as
 * in its literal): `cache`'s own while it may use the lock, `undefined` once Redis refused a script
 * (`lockUsable`), so that the core then protects in-process only. Returns `target`.
 */
export function defineFillLockMembers<T extends object>(
  target: T,
  cache: RedisProtocolCache,
): T & FillLockMembers {
  const state: LockState = {
    cache,
    tryAcquireFillLock: (key, ttl) => cache.tryAcquireFillLock(key, ttl),
    tryAcquireFillLockAndRead: (key, ttl) => cache.tryAcquireFillLockAndRead(key, ttl),
  };
  Object.defineProperty(target, LOCK, { value: state });
  Object.defineProperty(target, 'tryAcquireFillLock', {
    get: tryAcquireFillLockOf,
    enumerable: true,
    configurable: true,
  });
  Object.defineProperty(target, 'tryAcquireFillLockAndRead', {
    get: tryAcquireFillLockAndReadOf,
    enumerable: true,
    configurable: true,
  });
  return target as T & FillLockMembers;
}
