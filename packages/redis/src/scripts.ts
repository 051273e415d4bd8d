import { createHash } from 'node:crypto';
import {
  DELETE_LUA,
  EXTEND_LOCK_LUA,
  RELEASE_LOCK_LUA,
  SERVER_TIME_LUA,
  WRITE_GUARD_LUA,
} from '@stampede/core/adapter';
import type { Cluster, Redis } from 'ioredis';

/** A client `createRedisCache` accepts: a standalone `Redis` or a `Cluster`. */
export type RedisClient = Redis | Cluster;

/** A Lua script and its SHA1, for EVALSHA. */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

function lua(source: string): LuaScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Refuses a write older than the stored entry or tombstone (see `WRITE_GUARD_LUA` in core). */
export const WRITE_SCRIPT = lua(WRITE_GUARD_LUA);

/** Replaces an entry with a tombstone holding Redis's own time (see `DELETE_LUA` in core). */
export const DELETE_SCRIPT = lua(DELETE_LUA);

/** Redis's time in ms, to measure the offset of this process's clock (see `SERVER_TIME_LUA` in core). */
export const TIME_SCRIPT = lua(SERVER_TIME_LUA);

/** Releases an owned lock and announces the outcome in the same script (see `RELEASE_LOCK_LUA` in core). */
export const RELEASE_SCRIPT = lua(RELEASE_LOCK_LUA);

/** Extends the lock only for its owner (see `EXTEND_LOCK_LUA` in core). */
export const EXTEND_SCRIPT = lua(EXTEND_LOCK_LUA);

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Runs `script` by EVALSHA, falling back to EVAL when the node does not have it cached yet (a
 * restarted server, or another cluster node than last time).
 */
export async function runScript(
  client: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}
