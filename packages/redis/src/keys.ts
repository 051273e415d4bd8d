import { type RemoteKeys, remoteKeys } from '@stampede/redis-protocol';

/** The Redis names one cache key maps to (the layout every stampede Redis-protocol binding shares). */
export type RedisKeys = RemoteKeys;

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel, all in one Redis Cluster hash slot
 * (the layout of `@stampede/redis-protocol`).
 *
 * @throws RangeError for a prefix whose first `{` is directly followed by `}`
 * @example
 * redisKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function redisKeys(prefix: string, key: string): RedisKeys {
  return remoteKeys(prefix, key);
}
