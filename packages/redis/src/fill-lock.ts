import { randomBytes } from 'node:crypto';
import { type FillLock, type FillOutcome, pxArgument } from '@stampede/core/adapter';
import type { RedisContext } from './context.js';
import { redisKeys } from './keys.js';
import { EXTEND_SCRIPT, RELEASE_SCRIPT, runScript } from './scripts.js';

/**
 * The handle of a lock on `key` held with `token`. `release` deletes the lock only if `token` still
 * owns it and announces the outcome on the key's channel in the same script (even when the lock had
 * lapsed: the fill did end, and waiters re-check either way).
 */
export function fillLockHandle(context: RedisContext, key: string, token: string): FillLock {
  const { lock, channel } = redisKeys(context.prefix, key);
  let released = false;
  return {
    async release(outcome: FillOutcome): Promise<void> {
      if (released) return;
      released = true;
      await context.call('release', key, () =>
        runScript(context.client, RELEASE_SCRIPT, [lock, channel], [token, outcome]),
      );
    },
    async extend(ttl: number): Promise<boolean> {
      if (released) return false;
      const held = await context.call('extend', key, () =>
        runScript(context.client, EXTEND_SCRIPT, [lock], [token, pxArgument(ttl)]),
      );
      return held === 1;
    },
  };
}

/**
 * `SET <lock> <random token> NX PX <ttl>`: the lock, or `undefined` when another holder has it.
 * A grant that arrives after `operationTimeout` (the command sat in the offline queue) is released
 * at once, so a lock nobody knows about never blocks the fleet for a whole `lockTtl`.
 */
export async function acquireFillLock(
  context: RedisContext,
  key: string,
  ttl: number,
): Promise<FillLock | undefined> {
  const { lock, channel } = redisKeys(context.prefix, key);
  const token = randomBytes(16).toString('hex');
  const granted = await context.call(
    'lock',
    key,
    () => context.client.set(lock, token, 'PX', pxArgument(ttl), 'NX'),
    (late) => {
      if (late === 'OK') {
        runScript(context.client, RELEASE_SCRIPT, [lock, channel], [token, '']).catch(() => {
          // It lapses after its TTL anyway.
        });
      }
    },
  );
  return granted === 'OK' ? fillLockHandle(context, key, token) : undefined;
}
