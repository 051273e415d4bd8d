import { type FillLock, type FillOutcome, pxArgument } from '@stampede/core/adapter';
import type { UpstashClient } from './client.js';
import { upstashKeys } from './keys.js';
import { callUpstash, keepAlive, type OperationContext } from './operation.js';
import { EXTEND_SCRIPT, RELEASE_SCRIPT, runScript } from './scripts.js';
import { randomToken } from './web-crypto.js';

/**
 * `SET <lock> <random token> NX PX <ttl>`: the lock, or `undefined` when another holder has it. A
 * grant that answers only after `operationTimeout` is released at once, so a lock nobody knows about
 * never blocks the fleet for a whole `lockTtl`.
 */
export async function acquireFillLock(
  client: UpstashClient,
  context: OperationContext,
  prefix: string,
  key: string,
  ttl: number,
): Promise<FillLock | undefined> {
  const { lock, channel } = upstashKeys(prefix, key);
  const token = randomToken();
  const granted = await callUpstash(
    context,
    'lock',
    key,
    () => client.set(lock, token, { nx: true, px: Number(pxArgument(ttl)) }),
    (late) => {
      if (late === 'OK') {
        runScript(client, RELEASE_SCRIPT, [lock, channel], [token, '']).catch(() => {
          // It lapses after its TTL anyway.
        });
      }
    },
  );
  if (granted !== 'OK') return undefined;
  let released = false;
  return {
    async release(outcome: FillOutcome): Promise<void> {
      if (released) return;
      released = true;
      await keepAlive(
        context,
        callUpstash(context, 'release', key, () =>
          runScript(client, RELEASE_SCRIPT, [lock, channel], [token, outcome]),
        ),
      );
    },
    async extend(next: number): Promise<boolean> {
      if (released) return false;
      const held = await callUpstash(context, 'extend', key, () =>
        runScript(client, EXTEND_SCRIPT, [lock], [token, pxArgument(next)]),
      );
      return Number(held) === 1;
    },
  };
}
