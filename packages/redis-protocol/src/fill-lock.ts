import type {
  CacheEntry,
  CacheSetOptions,
  FillLock,
  FillOutcome,
  MaybePromise,
} from '@stampede/core/adapter';
import { checkLockTtl, kindOf } from '@stampede/core/adapter';
import { isPermissionError } from './access.js';
import type { RedisProtocolContext } from './context.js';
import { ANNOUNCED_VALUE_LIMIT, pxArgument, remoteKeys, type WriteGuardArgs } from './layout.js';
import { COMMIT_SCRIPT, EXTEND_SCRIPT, type LuaScript, RELEASE_SCRIPT } from './scripts.js';
import { randomToken } from './web-crypto.js';

// The lease of a handle made without one: the core's default `lockTtl`.
const DEFAULT_LEASE_MS = 10_000;

/**
 * What a lock handle needs to commit (write, release and announce in one script): only given where
 * the lock lives with the values (no separate lock client).
 */
export interface FillLockWriter {
  /**
   * The write guard's arguments for `entry` (see `remoteWriteArgs`): the arguments themselves when
   * they are ready at once (the commit then goes out in the same tick), else a promise of them.
   * @throws the cache's encode error for a value the serializer refuses (or rejects with it)
   */
  args(key: string, entry: CacheEntry, options: CacheSetOptions): MaybePromise<WriteGuardArgs>;
  /**
   * The prefix the commit script reads tags' keys under, to leave a tag-invalidated entry out of
   * the announcement; `''` where it cannot (a Cluster whose prefix does not pin the slot): tagged
   * entries are then announced without their value.
   */
  readonly tagPrefix: string;
}

/**
 * The handle of a lock on `key` held with `token` (on the context's lock client). `release` deletes
 * the lock only if `token` still owns it and then announces the outcome on the key's channel in the
 * same script; it is handed to `waitUntil`. A release whose lock lapsed and was taken by another
 * holder announces nothing: the waiters on the key now wait for that one, and a late release (a
 * retry after a fault) would only wake them to a read for nothing (a lapsed lock nobody holds is
 * announced: its waiters may take it at once). Once Redis has refused the PUBLISH, releases stop
 * announcing.
 *
 * With `writer` (the lock lives with the values), the handle also has `commit`: the write guard, the
 * compare-and-delete of the lock and the announcement in one script ({@link COMMIT_SCRIPT}); the
 * announcement carries the stored text up to {@link ANNOUNCED_VALUE_LIMIT} bytes, naming `token` as
 * its holder, and is sent unless another holder has the lock and the commit stored nothing (a stored
 * value is a fresh entry the waiters can read, whoever holds the lock now). A commit that fails leaves `release` usable.
 *
 * A release that fails on a fault (an error or a time-out; not a permission refusal) is reported
 * once (`backend-error`, operation `release`) and sent again in the background (the context's
 * `releaseRetries`) until it lands or the lock would have lapsed; `release` resolves only then, so
 * `whenIdle` and `waitUntil` cover the retries (the fill's callers have their value already).
 * Closing the cache (`releaseRetries.settle()`) makes each pending retry's last attempt at once. A
 * commit that fails is not sent again as a write: the core reports it (`set`) and calls `release`
 * with `'filled'`, which frees the lock, retried like any release, and wakes the waiters, who read
 * the key and fill it themselves if the write did not land. The lock is what holds the fleet up.
 *
 * @param lease the TTL the lock was granted with, in ms (default 10 000, the core's default
 *   `lockTtl`): retries of a failed release stop once it would have lapsed; extensions push it on.
 */
export function fillLockHandle(
  context: RedisProtocolContext,
  key: string,
  token: string,
  writer?: FillLockWriter,
  lease = DEFAULT_LEASE_MS,
): FillLock {
  const { value, lock, channel } = remoteKeys(context.prefix, key);
  const { operations, runLockScript, access } = context;
  let released = false;
  // When the lock has lapsed at the latest: the grant's answer came before now, so its TTL ran from
  // earlier. Each extension moves it on.
  let lapsesBy = Date.now() + lease;
  // A release (or commit) that answered after its time-out landed all the same: retries would only
  // repeat it.
  let landedLate = false;
  const release = (announce: string): Promise<unknown> =>
    operations.call(
      'release',
      key,
      () => runLockScript(RELEASE_SCRIPT, [lock, channel], [token, announce]),
      () => {
        landedLate = true;
      },
    );
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
  const releaseOrRetry = async (outcome: FillOutcome): Promise<void> => {
    try {
      await releaseOnce(outcome);
      return;
    } catch (error) {
      // A refusal is not transient: it is thrown as before (and warned of by the script runner).
      if (isPermissionError(error)) throw error;
      operations.report('release', key, error);
    }
    await context.releaseRetries.retry({
      attempt: () => releaseOnce(outcome),
      lapsesBy,
      settled: () => landedLate || !access.scripts,
    });
  };
  const handle: FillLock = {
    async release(outcome: FillOutcome): Promise<void> {
      // Checked before anything is sent: a client's encoder may throw on a missing argument where
      // no caller can catch it. A bad call leaves the lock to a good one.
      if (outcome !== 'filled' && outcome !== 'failed') {
        throw new TypeError(`outcome must be 'filled' or 'failed'; got ${kindOf(outcome)}`);
      }
      if (released) return;
      released = true;
      await operations.keepAlive(releaseOrRetry(outcome));
    },
    async extend(ttl: number): Promise<boolean> {
      // NaN would fail inside the script, naming nothing; 0 or less would end the lock at once.
      checkLockTtl(ttl);
      if (released) return false;
      let held: unknown;
      try {
        held = await operations.call('extend', key, () =>
          // Where the lock lives with the values, a tombstone on the key is extended with it.
          runLockScript(EXTEND_SCRIPT, writer === undefined ? [lock] : [lock, value], [
            token,
            pxArgument(ttl),
          ]),
        );
      } catch (error) {
        // It may have landed (a time-out): the lock may live that long.
        lapsesBy = Math.max(lapsesBy, Date.now() + ttl);
        throw error;
      }
      // Extended, but the tombstone on the key could not be (see EXTEND_LOCK_LUA): PTTL refused.
      if (typeof held === 'string') access.auxiliaryFailed('PTTL', new Error(held));
      const extended = Number(held) === 1 || typeof held === 'string';
      if (extended) lapsesBy = Math.max(lapsesBy, Date.now() + ttl);
      return extended;
    },
  };
  if (writer === undefined) return handle;
  const commitOnce = async (entry: CacheEntry, options: CacheSetOptions): Promise<boolean> => {
    const ready = writer.args(key, entry, options);
    const args = 'then' in ready ? await ready : ready;
    const run = (announce: string): Promise<unknown> =>
      operations.call(
        'commit',
        key,
        () =>
          context.runScript(
            COMMIT_SCRIPT,
            [value, lock, channel],
            [
              args.text,
              args.createdAt,
              args.px,
              args.direct ?? '',
              token,
              announce,
              writer.tagPrefix,
              String(ANNOUNCED_VALUE_LIMIT),
            ],
          ),
        // Landed after its time-out: the lock went with it, so a release that then fails is not retried.
        () => {
          landedLate = true;
        },
      );
    const announce = access.publish ? 'filled' : '';
    let wrote: unknown;
    try {
      wrote = await run(announce);
    } catch (error) {
      if (announce === '' || !isPermissionError(error)) throw error;
      // The PUBLISH comes last: refused alone, the write and the release were made. Run again
      // without it (the write is the same entry, which the guard lets through again).
      wrote = await run('');
      access.publishRefused(error);
    }
    // Only now: a commit that failed leaves `release` to the core.
    released = true;
    // The script answers 0 when the guard refused the write (a newer entry or tombstone is there).
    return !(wrote === 0 || wrote === '0');
  };
  handle.commit = async (entry, options) => {
    if (released) throw new Error(`the fill lock of '${key}' was already released: nothing to commit`);
    return operations.keepAlive(commitOnce(entry, options));
  };
  return handle;
}

/**
 * Releases a lock granted to a call that had already timed out (nobody fills under it), as any
 * holder's release: announced as `failed`, so a replica that lost to it contends again at once, and
 * sent again on a fault (before, one attempt: a fault left the lock blocking the fleet for its TTL).
 */
function releaseLateGrant(context: RedisProtocolContext, key: string, token: string, ttl: number): void {
  Promise.resolve(fillLockHandle(context, key, token, undefined, ttl).release('failed')).catch(() => {
    // Refused (the script runner warns of it): it lapses after its TTL.
  });
}

/**
 * `SET <lock> <random token> NX PX <ttl>`: the lock, or `undefined` when another holder has it. A
 * grant that answers only after `operationTimeout` (the command sat in an offline queue, or the
 * server was slow) is released at once, a failed release retried as any other, so a lock nobody
 * knows about never blocks the fleet for a whole `lockTtl`.
 */
export async function acquireFillLock(
  context: RedisProtocolContext,
  key: string,
  ttl: number,
  writer?: FillLockWriter,
): Promise<FillLock | undefined> {
  checkLockTtl(ttl);
  const { lock } = remoteKeys(context.prefix, key);
  const token = randomToken();
  const granted = await context.operations.call(
    'lock',
    key,
    () => context.lockClient.setIfAbsent(lock, token, pxArgument(ttl)),
    (late) => {
      if (late === 'OK') releaseLateGrant(context, key, token, ttl);
    },
  );
  return granted === 'OK' ? fillLockHandle(context, key, token, writer, ttl) : undefined;
}

/** What {@link acquireFillLockAndRead} found: the lock (or not), its holder, the stored text. */
export interface LockAndRead {
  /** The lock, or `undefined` when another holder has it. */
  readonly lock: FillLock | undefined;
  /** The token of the lock's holder (ours when granted), as the holder's announcement names it. */
  readonly holder: string | undefined;
  /** What a tag-checked read gives (see `LOCK_AND_READ_LUA`): text, or `null` for nothing. */
  readonly stored: unknown;
}

/**
 * The lock attempt and the read of the entry in one script (`script`, {@link
 * LOCK_AND_READ_SCRIPT}), on the value client (the lock lives there). A grant that answers only after
 * `operationTimeout` is released at once (and retried on a fault), as {@link acquireFillLock} does.
 */
export async function acquireFillLockAndRead(
  context: RedisProtocolContext,
  key: string,
  ttl: number,
  script: LuaScript,
  writer: FillLockWriter,
): Promise<LockAndRead> {
  checkLockTtl(ttl);
  const { value, lock } = remoteKeys(context.prefix, key);
  const token = randomToken();
  const reply = await context.operations.call(
    'lock',
    key,
    () => context.runScript(script, [value, lock], [token, pxArgument(ttl), writer.tagPrefix]),
    // The lock lives with the values here (`writer`): the lock client's runner is this one.
    (late) => {
      if (granted(late)) releaseLateGrant(context, key, token, ttl);
    },
  );
  const [, holder, stored] = Array.isArray(reply) ? (reply as unknown[]) : [];
  return {
    lock: granted(reply) ? fillLockHandle(context, key, token, writer, ttl) : undefined,
    holder: typeof holder === 'string' && holder.length !== 0 ? holder : undefined,
    stored: stored ?? null,
  };
}

function granted(reply: unknown): boolean {
  return Array.isArray(reply) && Number(reply[0]) === 1;
}
