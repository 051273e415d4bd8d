import { type RemoteKeys, remoteKeys } from '@stampede/core/adapter';

export { checkRemotePrefix as checkPrefix } from '@stampede/core/adapter';

/** The Redis names one cache key maps to (the layout every stampede Redis-protocol adapter shares). */
export type RedisKeys = RemoteKeys;

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel, all in one Redis Cluster hash slot.
 *
 * @throws RangeError for a prefix whose first `{` is directly followed by `}`
 * @example
 * redisKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function redisKeys(prefix: string, key: string): RedisKeys {
  return remoteKeys(prefix, key);
}
