import type { CacheEntry } from './cache.js';

/**
 * The never-older rule every adapter's `set` follows: `incoming` may replace `stored` unless
 * `stored` was created later (a larger `createdAt`). A tie goes to the write, so a `setValue` in
 * the same millisecond as the fill it overrides still lands. Nothing stored means the write lands.
 *
 * This is the rule the memory adapter applies in `set` and the Redis write guard
 * (`WRITE_GUARD_LUA` of `@stampede/redis-protocol`) applies on the server. Deletions are the adapter's own business (a tombstone
 * or a record of when the key was deleted), since a deleted key has no entry to compare with.
 *
 * @param stored - what the cache holds for the key now, or `undefined`
 * @param incoming - the entry a `set` wants to store
 * @returns `true` when `incoming` should be written over `stored`
 * @example
 * set(key, entry, options) {
 *   // Refused: answer `false` (a tiered cache must not keep the write in its local copy).
 *   if (!shouldReplace(store.get(key), entry)) return false;
 *   store.set(key, entry);
 *   return true;
 * }
 */
export function shouldReplace(stored: CacheEntry | undefined, incoming: CacheEntry): boolean {
  // `!(a > b)` rather than `a <= b`: the Lua guard refuses only when the stored time is larger,
  // and a NaN must behave the same way on both sides.
  return stored === undefined || !(stored.createdAt > incoming.createdAt);
}
