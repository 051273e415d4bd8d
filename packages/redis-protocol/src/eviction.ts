import { kindOf, reportWarning } from '@stampede/core/adapter';
import type { RedisProtocolClient } from './client.js';

/** `CONFIG GET` answered as a record or as Redis's flat `[name, value, ...]` list. */
function configRecord(reply: unknown): Record<string, string> {
  if (Array.isArray(reply)) {
    const record: Record<string, string> = {};
    for (let at = 0; at + 1 < reply.length; at += 2) record[String(reply[at])] = String(reply[at + 1]);
    return record;
  }
  if (typeof reply === 'object' && reply !== null) {
    return Object.fromEntries(Object.entries(reply).map(([name, value]) => [name, String(value)]));
  }
  return {};
}

/**
 * The risk, in words, of a server with this `maxmemory` / `maxmemory-policy`, or `undefined` when
 * it cannot evict a lock: the policy is `noeviction`, or `maxmemory` is 0 (no limit). Every other
 * policy can: `allkeys-*` evicts any key, and `volatile-*` evicts keys with a TTL, which every lock
 * has (it is among the first taken).
 */
export function evictionRisk(config: Readonly<Record<string, string>>): string | undefined {
  if (typeof config !== 'object' || config === null) {
    throw new TypeError(`config must be CONFIG GET's answer as an object; got ${kindOf(config)}`);
  }
  const policy = config['maxmemory-policy'];
  const maxmemory = config.maxmemory;
  if (policy === undefined || maxmemory === undefined) return undefined;
  if (policy === 'noeviction' || Number(maxmemory) === 0) return undefined;
  return `maxmemory-policy ${policy} with maxmemory ${maxmemory}`;
}

/**
 * Reads the eviction policy of the server holding the fill locks (`CONFIG GET maxmemory*`) and warns
 * once when it may evict a lock while its fill runs, which lets a second replica fill the same key.
 * A server that refuses CONFIG (managed Redis, an ACL user without it) or a client without
 * `configGet` is not checked; this never rejects.
 */
export async function checkEvictionPolicy(
  lockClient: RedisProtocolClient,
  name: string,
  separateLockServer: boolean,
): Promise<void> {
  if (lockClient.configGet === undefined) return;
  let risk: string | undefined;
  try {
    risk = evictionRisk(configRecord(await lockClient.configGet('maxmemory*')));
  } catch {
    return;
  }
  if (risk === undefined) return;
  const where = separateLockServer ? 'The Redis given as lockClient' : 'The Redis';
  reportWarning(
    name,
    `stampede: ${where} of cache '${name}' has ${risk}: under memory pressure it can evict a fill lock ` +
      'while its fill runs, and another replica then fills the same key (one fill fleet-wide is not kept). ' +
      (separateLockServer
        ? 'Set maxmemory-policy noeviction on the server holding the locks.'
        : 'Set maxmemory-policy noeviction, or put the locks on a non-evicting Redis with the lockClient option.'),
  );
}
