import {
  createServerAccess,
  isAuxiliaryRefusal,
  isScriptingUnavailable,
  type ServerAccess,
} from './access.js';
import type { RedisProtocolClient } from './client.js';
import type { OperationRunner } from './operation.js';
import { createReleaseRetries, type ReleaseRetries } from './release-retry.js';
import { createScriptRunner, type ScriptRunner } from './scripts.js';

/** What the parts of one Redis-protocol cache share. */
export interface RedisProtocolContext {
  /** The binding's client, adapted: values, tombstones and the server clock live here. */
  readonly client: RedisProtocolClient;
  /** The key prefix. */
  readonly prefix: string;
  /** Bounded calls and fault reports. */
  readonly operations: OperationRunner;
  /** Runs a Lua script on `client` (EVALSHA, then EVAL). Not bounded: wrap it in `operations.call`. */
  readonly runScript: ScriptRunner;
  /**
   * Where fill locks are taken, released and extended, and where a fill's end is published (and so
   * where a binding subscribes for it): `client` itself unless the binding was given a separate
   * lock client (a Redis that never evicts, while values live on one that may).
   */
  readonly lockClient: RedisProtocolClient;
  /** Runs a Lua script on `lockClient`. Not bounded: wrap it in `operations.call`. */
  readonly runLockScript: ScriptRunner;
  /** What the Redis user was found allowed to do (scripts, PUBLISH). */
  readonly access: ServerAccess;
  /**
   * The background retries of this cache's lock releases that failed on a fault. A binding's
   * `close()` calls `releaseRetries.settle()` first: each pending retry makes its last attempt at
   * once, and none runs after `close()` resolved.
   */
  readonly releaseRetries: ReleaseRetries;
}

/**
 * `runner` with every failure shown to `access`, so a refused script turns scripting off. A release
 * or a commit that announces an outcome is left to its caller: the refusal may be the PUBLISH alone
 * (the lock is deleted before it), which the caller tells apart by running it again without
 * announcing.
 */
function watched(runner: ScriptRunner, access: ServerAccess): ScriptRunner {
  return async (script, keys, args) => {
    try {
      return await runner(script, keys, args);
    } catch (error) {
      const announcing = script.announcement !== undefined && (args[script.announcement] ?? '') !== '';
      // A server without EVAL/EVALSHA refuses every script, whatever it holds. A script that needs
      // a command of its own (TIME, PEXPIRE) may be refused that command alone, from inside it; a
      // refusal of EVALSHA itself (or of a key) is a refusal of scripts, whichever script met it.
      if (isScriptingUnavailable(error)) access.scriptFailed(error);
      else if (script.auxiliary !== undefined && isAuxiliaryRefusal(error, script.auxiliary)) {
        access.auxiliaryFailed(script.auxiliary, error);
      } else if (!announcing) access.scriptFailed(error);
      throw error;
    }
  };
}

/**
 * The context of a cache on `client` under `prefix`, with its locks on `lockClient` when given (and
 * not `client` itself).
 */
export function createRedisProtocolContext(
  client: RedisProtocolClient,
  prefix: string,
  operations: OperationRunner,
  lockClient?: RedisProtocolClient | undefined,
): RedisProtocolContext {
  const access = createServerAccess(operations.name);
  const runScript = watched(createScriptRunner(client), access);
  const separate = lockClient !== undefined && lockClient !== client;
  return {
    client,
    prefix,
    operations,
    runScript,
    lockClient: separate ? lockClient : client,
    runLockScript: separate ? watched(createScriptRunner(lockClient), access) : runScript,
    access,
    releaseRetries: createReleaseRetries(),
  };
}
