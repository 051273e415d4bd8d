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

/** What one server's eviction policy was found to be (see {@link evictionRisk}). */
interface Evicting {
  /** The risk in words: `maxmemory-policy <policy> with maxmemory <bytes>`. */
  readonly risk: string;
  /** The `maxmemory-policy` (never `noeviction`). */
  readonly policy: string;
}

/** The eviction policy of the server behind `client`, when it can evict; `undefined` when it cannot or would not say. */
async function evictingPolicy(client: RedisProtocolClient): Promise<Evicting | undefined> {
  if (client.configGet === undefined) return undefined;
  try {
    const config = configRecord(await client.configGet('maxmemory*'));
    const risk = evictionRisk(config);
    return risk === undefined ? undefined : { risk, policy: config['maxmemory-policy'] ?? '' };
  } catch {
    return undefined;
  }
}

/**
 * What eviction on the values' server can drop before the values it invalidates, and what follows.
 * A tag's record (`<prefix>{tag}:tag`) has no TTL, so only an `allkeys-*` policy takes it; a
 * tombstone has one (`tombstoneTtl`, or the lock's), so every evicting policy can, and
 * `volatile-ttl` takes the shortest TTLs first: tombstones among the first.
 */
function invalidationsAtRisk(policy: string): string {
  const tombstone =
    policy === 'volatile-ttl'
      ? "a delete's tombstone (kept tombstoneTtl: volatile-ttl evicts it among the first, its TTL being short) before its time"
      : "a delete's tombstone (kept tombstoneTtl) before its time";
  return policy.startsWith('allkeys-')
    ? `a tag's invalidation record (<prefix>{tag}:tag, kept without a TTL) before the values it ` +
        `invalidates, and ${tombstone}: the tag's invalidated values are then served again, and a fill ` +
        'that started before the delete writes its older value back'
    : `${tombstone}: a fill that started before the delete then writes its older value back`;
}

/** How to keep invalidations on a values' server with `policy` (the other choices it has). */
function keepInvalidations(policy: string): string {
  return (
    "Invalidations hold only while the values' Redis evicts none of these: run it with " +
    "maxmemory-policy noeviction (or no maxmemory) and let the entries' TTLs trim it, sized for your " +
    'values; evicting, give it headroom enough that eviction seldom runs (it then seldom undoes one)' +
    (policy.startsWith('allkeys-') ? TAG_RECORDS_KEPT : '.')
  );
}

const TAG_RECORDS_KEPT =
  '; volatile-lru or volatile-lfu never evict tag records (they have no TTL), though tombstones still can be.';

/**
 * Reads the eviction policy of the servers a cache uses (`CONFIG GET maxmemory*`) and warns once,
 * in one message, of what they may evict:
 *
 * - the server holding the fill locks (`lockClient`): a lock evicted while its fill runs lets a
 *   second replica fill the same key;
 * - the server holding the values (`lockClient` itself unless `separateLockServer`, else
 *   `valueClient` when given): a delete's tombstone evicted (any evicting policy) or a tag's
 *   invalidation record (`allkeys-*` only: it has no TTL) before the values it invalidates lets
 *   those values back.
 *
 * A server that refuses CONFIG (managed Redis, an ACL user without it) or a client without
 * `configGet` is not checked; this never rejects.
 */
export async function checkEvictionPolicy(
  lockClient: RedisProtocolClient,
  name: string,
  separateLockServer: boolean,
  valueClient?: RedisProtocolClient | undefined,
): Promise<void> {
  const valueServer = separateLockServer && valueClient !== lockClient ? valueClient : undefined;
  const [locks, separateValues] = await Promise.all([
    evictingPolicy(lockClient),
    valueServer === undefined ? undefined : evictingPolicy(valueServer),
  ]);
  const values = separateLockServer ? separateValues : locks;
  if (locks === undefined && values === undefined) return;
  const lockRisk =
    'under memory pressure it can evict a fill lock while its fill runs, and another replica then ' +
    'fills the same key (one fill fleet-wide is not kept)';
  const parts: string[] = [];
  if (!separateLockServer && locks !== undefined) {
    parts.push(
      `The Redis of cache '${name}' has ${locks.risk}: ${lockRisk}; and it can evict ` +
        `${invalidationsAtRisk(locks.policy)}.`,
      "Set maxmemory-policy noeviction (or no maxmemory) and let the entries' TTLs trim it, sized for " +
        'your values: locks, tag records and tombstones are then kept. With the locks on a non-evicting ' +
        'Redis (the lockClient option) this one may evict, but invalidations then hold only while it ' +
        'evicts none of these: give it headroom enough that eviction seldom runs' +
        (locks.policy.startsWith('allkeys-') ? TAG_RECORDS_KEPT : '.'),
    );
  } else {
    if (locks !== undefined) {
      parts.push(`The Redis given as lockClient of cache '${name}' has ${locks.risk}: ${lockRisk}.`);
    }
    if (values !== undefined) {
      const where =
        locks === undefined
          ? `The Redis holding the values of cache '${name}'`
          : 'The Redis holding its values';
      parts.push(
        `${where} has ${values.risk}: under memory pressure it can evict ${invalidationsAtRisk(values.policy)}.`,
      );
    }
    if (locks !== undefined) parts.push('Set maxmemory-policy noeviction on the server holding the locks.');
    if (values !== undefined) parts.push(keepInvalidations(values.policy));
  }
  reportWarning(name, `stampede: ${parts.join(' ')}`);
}
