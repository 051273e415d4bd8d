import { createHash } from 'node:crypto';
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

/** What a tombstone starts with; envelopes start with `s<version>|`. */
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

/** KEYS[1] lock key; ARGV[1] token. Deletes the lock only if the token still owns it. */
export const RELEASE_SCRIPT = lua(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`);

/** KEYS[1] lock key; ARGV[1] token, ARGV[2] new TTL in ms. Extends the lock only for its owner. */
export const EXTEND_SCRIPT = lua(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`);

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
