import { type RemoteKeys, remoteKeys } from '@stampede/redis-protocol';

/** The Redis names one cache key maps to: the layout `@stampede/redis` uses too. */
export type UpstashKeys = RemoteKeys;

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel. The layout is `@stampede/redis`'s (both
 * take it from `@stampede/redis-protocol`), so both bindings can share one database (and one lock)
 * when given the same prefix.
 *
 * @throws RangeError for a prefix whose first `{` is directly followed by `}`
 * @example
 * upstashKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function upstashKeys(prefix: string, key: string): UpstashKeys {
  return remoteKeys(prefix, key);
}
