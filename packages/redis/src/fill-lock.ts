import type { FillLock } from '@stampede/core/adapter';
import { fillLockHandle as protocolFillLockHandle } from '@stampede/redis-protocol';
import type { RedisContext } from './context.js';

/**
 * The handle of a lock on `key` held with `token` (see `fillLockHandle` of
 * `@stampede/redis-protocol`): `release` deletes the lock only if `token` still owns it and
 * announces the outcome on the key's channel in the same script.
 */
export function fillLockHandle(context: RedisContext, key: string, token: string): FillLock {
  return protocolFillLockHandle(context.protocol, key, token);
}
