/**
 * The latest time recorded for each name (a key's last delete, a tag's last invalidation), at most
 * `max` of them: recording a name again makes it the newest; past `max`, the oldest record goes, its
 * time raises the `floor` (so forgetting never serves what a record would have refused) and
 * `onForget` gets it.
 *
 * A `Map` in recording order, rather than a second `LRUCache`: lru-cache allocates its arrays for
 * `max` entries when it is made (some 150 ms and 30 MB at a million), which a cache paid twice
 * more for records most caches never hold; a `Map` grows with what it holds.
 */
export interface LatestTimes {
  /** The time recorded for `name`, or `undefined`. */
  peek(name: string): number | undefined;
  /** Records `at` for `name`, unless a later time is recorded for it; `name` becomes the newest. */
  record(name: string, at: number): void;
  /** Forgets every record (without `onForget`; the floor stays). */
  clear(): void;
  /** The latest time forgotten (or raised to), `-Infinity` before any: it stands for every name. */
  readonly floor: number;
  /** Raises the floor to `at` (a time that stands for every name, such as a `clear`'s). */
  raise(at: number): void;
  /** The latest time among `names`' records and the floor. */
  latest(names: readonly string[]): number;
}

export function createLatestTimes(max: number, onForget?: (at: number) => void): LatestTimes {
  const times = new Map<string, number>();
  let floor = Number.NEGATIVE_INFINITY;
  // The names in recording order, from the oldest. One iterator kept across records: a new one
  // would walk from the start of the Map's table past every slot deleted since it was last
  // compacted, which made each record O(max) once the records were full (18 us at a million). A
  // live iterator skips deleted entries and sees those added after it, so it always stands at the
  // oldest record.
  let oldestFirst: Iterator<string> | undefined;
  return {
    peek: (name) => times.get(name),
    record(name, at) {
      const previous = times.get(name);
      if (previous !== undefined) times.delete(name);
      times.set(name, previous !== undefined && previous > at ? previous : at);
      if (times.size <= max) return;
      oldestFirst ??= times.keys();
      const oldest = oldestFirst.next();
      if (oldest.done === true) return; // not while the Map holds more than `max` (at least 1)
      const time = times.get(oldest.value) as number;
      times.delete(oldest.value);
      if (time > floor) floor = time;
      onForget?.(time);
    },
    clear: () => {
      times.clear();
      oldestFirst = undefined;
    },
    get floor() {
      return floor;
    },
    raise(at) {
      if (at > floor) floor = at;
    },
    latest(names) {
      let latest = floor;
      for (const name of names) {
        const at = times.get(name);
        if (at !== undefined && at > latest) latest = at;
      }
      return latest;
    },
  };
}
