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

/** What a tombstone starts with; envelopes start with `s<version>|`. Same as `@stampede/redis`. */
export const TOMBSTONE_PREFIX = 't|';

/**
 * KEYS[1] value key; ARGV[1] envelope, ARGV[2] its createdAt, ARGV[3] PX ('' for none).
 * Refuses (0) when the stored entry is newer or a tombstone is newer than the fill's start, so a
 * fill never replaces a newer value nor undoes an invalidation that happened after it started.
 */
export const WRITE_SCRIPT = lua(`
local current = redis.call('GET', KEYS[1])
if current then
  local created = tonumber(ARGV[2])
  local deleted = string.match(current, '^t|(%-?%d+)')
  if deleted then
    if tonumber(deleted) > created then return 0 end
  else
    local stored = string.match(current, '^s%d+|(%-?%d+)|')
    if stored and tonumber(stored) > created then return 0 end
  end
end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
return 1
`);

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

/** KEYS[1] lock key; ARGV[1] token, ARGV[2] new TTL in ms. Extends the lock only for its owner. */
export const EXTEND_SCRIPT = lua(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`);

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
