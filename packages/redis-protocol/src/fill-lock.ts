import type { FillLock, FillOutcome } from '@stampede/core/adapter';
import { isPermissionError } from './access.js';
import type { RedisProtocolContext } from './context.js';
import { pxArgument, remoteKeys } from './layout.js';
import { EXTEND_SCRIPT, RELEASE_SCRIPT } from './scripts.js';
import { randomToken } from './web-crypto.js';

/**
 * The handle of a lock on `key` held with `token` (on the context's lock client). `release` deletes
 * the lock only if `token` still owns it and announces the outcome on the key's channel in the same
 * script (even when the lock had lapsed: the fill did end, and waiters re-check either way); it is
 * handed to `waitUntil`. Once Redis has refused the PUBLISH, releases stop announcing.
 */
export function fillLockHandle(context: RedisProtocolContext, key: string, token: string): FillLock {
  const { lock, channel } = remoteKeys(context.prefix, key);
  const { operations, runLockScript, access } = context;
  let released = false;
  const release = (announce: string): Promise<unknown> =>
    operations.call('release', key, () => runLockScript(RELEASE_SCRIPT, [lock, channel], [token, announce]));
  const releaseOnce = async (outcome: FillOutcome): Promise<void> => {
    const announce = access.publish ? outcome : '';
    try {
      await release(announce);
    } catch (error) {
      if (announce === '' || !isPermissionError(error)) throw error;
      // The script deletes the lock before it publishes, so a refused PUBLISH alone leaves the lock
      // released: a second release without the announcement tells that apart from refused scripts
      // (which it reports, through the script runner).
      await release('');
      access.publishRefused(error);
    }
  };
  return {
    async release(outcome: FillOutcome): Promise<void> {
      if (released) return;
      released = true;
      await operations.keepAlive(releaseOnce(outcome));
    },
    async extend(ttl: number): Promise<boolean> {
      if (released) return false;
      const held = await operations.call('extend', key, () =>
        runLockScript(EXTEND_SCRIPT, [lock], [token, pxArgument(ttl)]),
      );
      return Number(held) === 1;
    },
  };
}

/**
 * `SET <lock> <random token> NX PX <ttl>`: the lock, or `undefined` when another holder has it. A
 * grant that answers only after `operationTimeout` (the command sat in an offline queue, or the
 * server was slow) is released at once, so a lock nobody knows about never blocks the fleet for a
 * whole `lockTtl`.
 */
export async function acquireFillLock(
  context: RedisProtocolContext,
  key: string,
  ttl: number,
): Promise<FillLock | undefined> {
  const { lock, channel } = remoteKeys(context.prefix, key);
  const token = randomToken();
  const granted = await context.operations.call(
    'lock',
    key,
    () => context.lockClient.setIfAbsent(lock, token, pxArgument(ttl)),
    (late) => {
      if (late === 'OK') {
        context.runLockScript(RELEASE_SCRIPT, [lock, channel], [token, '']).catch(() => {
          // It lapses after its TTL anyway.
        });
      }
    },
  );
  return granted === 'OK' ? fillLockHandle(context, key, token) : undefined;
}
