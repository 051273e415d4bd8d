import { EXTEND_LOCK_LUA, WRITE_GUARD_LUA } from '@stampede/core';
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

/**
 * KEYS[1] lock key, KEYS[2] channel; ARGV[1] token, ARGV[2] outcome. Deletes the lock only if the
 * token still owns it, then announces the outcome (one request instead of two over HTTP; waiters
 * of `@stampede/redis` on the same database wake up on it).
 */
export const RELEASE_SCRIPT = lua(`
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  released = redis.call('DEL', KEYS[1])
end
if ARGV[2] ~= '' then redis.call('PUBLISH', KEYS[2], ARGV[2]) end
return released
`);

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
