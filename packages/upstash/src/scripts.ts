import {
  DELETE_LUA,
  EXTEND_LOCK_LUA,
  RELEASE_LOCK_LUA,
  SERVER_TIME_LUA,
  WRITE_GUARD_LUA,
} from '@stampede/core/adapter';
import type { UpstashClient } from './client.js';
import { sha1 } from './web-crypto.js';

/** A Lua script; its SHA-1 is computed once, on first use. */
export interface LuaScript {
  readonly source: string;
  sha: Promise<string | undefined> | undefined;
}

function lua(source: string): LuaScript {
  return { source: source.trim(), sha: undefined };
}

/** Refuses a write older than the stored entry or tombstone (see `WRITE_GUARD_LUA` in core). */
export const WRITE_SCRIPT = lua(WRITE_GUARD_LUA);

/** Replaces an entry with a tombstone holding Redis's own time (see `DELETE_LUA` in core). */
export const DELETE_SCRIPT = lua(DELETE_LUA);

/** Redis's time in ms, to measure the offset of this process's clock (see `SERVER_TIME_LUA` in core). */
export const TIME_SCRIPT = lua(SERVER_TIME_LUA);

/** Releases an owned lock and announces the outcome (see `RELEASE_LOCK_LUA` in core). */
export const RELEASE_SCRIPT = lua(RELEASE_LOCK_LUA);

/** Extends the lock only for its owner (see `EXTEND_LOCK_LUA` in core). */
export const EXTEND_SCRIPT = lua(EXTEND_LOCK_LUA);

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.toUpperCase().includes('NOSCRIPT');
}

/**
 * Runs `script` by EVALSHA, falling back to EVAL when the server does not have it cached (a
 * `SCRIPT FLUSH`, a restart, a new region); plain EVAL where SubtleCrypto is missing.
 */
export async function runScript(
  client: UpstashClient,
  script: LuaScript,
  keys: string[],
  args: string[],
): Promise<unknown> {
  script.sha ??= sha1(script.source).catch(() => undefined);
  const sha = await script.sha;
  if (sha === undefined) return client.eval(script.source, keys, args);
  try {
    return await client.evalsha(sha, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keys, args);
  }
}
