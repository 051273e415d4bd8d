import type { CacheEntry } from './cache.js';

// Every entry the core and the adapters built on it make comes from here, as an object literal of
// one of four fixed shapes (without or with `delta`, without or with `tags`, in the order of
// `CacheEntry`'s required fields first). A copy made by spreading (`{ ...entry, value }`) gets a
// hidden class of its own in V8, and every later hit on it paid some 40 ns more (a hit is about
// 100 ns): the entries a tiered cache kept from Redis, the tagged ones, the fail-safe ones.

/** The fields {@link changeEntry} may replace. */
export interface EntryChanges {
  readonly value?: unknown;
  readonly createdAt?: number;
  readonly freshUntil?: number;
  readonly staleUntil?: number;
  readonly tags?: readonly string[] | undefined;
}

/**
 * A {@link CacheEntry} of one of the fixed shapes: `delta` and `tags` are present only when given.
 * Adapters that decode entries should build them with this (or {@link changeEntry}) rather than by
 * spreading, so that hits on them stay as fast as on the core's own.
 */
export function createEntry(
  value: unknown,
  createdAt: number,
  freshUntil: number,
  staleUntil: number,
  delta?: number,
  tags?: readonly string[],
): CacheEntry {
  if (tags === undefined) {
    return delta === undefined
      ? { value, createdAt, freshUntil, staleUntil }
      : { value, createdAt, freshUntil, staleUntil, delta };
  }
  return delta === undefined
    ? { value, createdAt, freshUntil, staleUntil, tags }
    : { value, createdAt, freshUntil, staleUntil, delta, tags };
}

/** `entry` with the fields in `changes` replaced: a new entry built by {@link createEntry}. */
export function changeEntry(entry: CacheEntry, changes: EntryChanges): CacheEntry {
  return createEntry(
    'value' in changes ? changes.value : entry.value,
    changes.createdAt ?? entry.createdAt,
    changes.freshUntil ?? entry.freshUntil,
    changes.staleUntil ?? entry.staleUntil,
    entry.delta,
    'tags' in changes ? changes.tags : entry.tags,
  );
}
