/** The Redis names one cache key maps to. */
export interface RedisKeys {
  /** Holds the envelope (or, after a delete, a tombstone). */
  readonly value: string;
  /** The fill lock. */
  readonly lock: string;
  /** The pub/sub channel on which a fill's end is announced. */
  readonly channel: string;
}

// Percent-encoding of exactly these three characters is injective and leaves no brace in the tag,
// so a user key can neither end the hash tag early nor open a second one.
function escapeTag(key: string): string {
  return key.replace(/[%{}]/g, (char) => (char === '%' ? '%25' : char === '{' ? '%7B' : '%7D'));
}

/**
 * Throws a RangeError for a prefix that would split one key's names across Redis Cluster slots: one
 * whose first `{` is directly followed by `}` (an empty hash tag makes Redis hash each whole name).
 */
export function checkPrefix(prefix: string): void {
  const open = prefix.indexOf('{');
  if (open !== -1 && prefix[open + 1] === '}') {
    throw new RangeError(
      `prefix ${JSON.stringify(prefix)} opens an empty hash tag ('{}'): in Redis Cluster a key's value, lock and channel would land in different slots`,
    );
  }
}

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel. In Redis Cluster the three share a
 * hash slot: the first `{` is at or before ours, and our `}` (or a `}` in the prefix) closes it. A
 * prefix may carry its own hash tag (`app{1}:` puts every key in one slot); one that opens an empty
 * tag is refused.
 *
 * @throws RangeError for a prefix whose first `{` is directly followed by `}`
 *
 * @example
 * redisKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function redisKeys(prefix: string, key: string): RedisKeys {
  checkPrefix(prefix);
  const value = `${prefix}{${escapeTag(key)}}`;
  return { value, lock: `${value}:lock`, channel: `${value}:done` };
}
