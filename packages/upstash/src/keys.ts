/** The Redis names one cache key maps to. */
export interface UpstashKeys {
  /** Holds the envelope (or, after a delete, a tombstone). */
  readonly value: string;
  /** The fill lock. */
  readonly lock: string;
  /** The pub/sub channel on which a fill's end is announced. */
  readonly channel: string;
}

// Percent-encoding exactly these three characters is injective and leaves no brace in the tag, so
// two user keys never share a name and a user key cannot read as a lock or a channel.
function escapeTag(key: string): string {
  return key.replace(/[%{}]/g, (char) => (char === '%' ? '%25' : char === '{' ? '%7B' : '%7D'));
}

/**
 * The Redis key names for `key` under `prefix`: `<prefix>{<escaped key>}` for the value, with
 * `:lock` and `:done` appended for the lock and the channel. The layout is `@stampede/redis`'s, so
 * both adapters can share one database (and one lock) when given the same prefix.
 *
 * @example
 * upstashKeys('stampede:', 'a{b}c').value // 'stampede:{a%7Bb%7Dc}'
 */
export function upstashKeys(prefix: string, key: string): UpstashKeys {
  const value = `${prefix}{${escapeTag(key)}}`;
  return { value, lock: `${value}:lock`, channel: `${value}:done` };
}
