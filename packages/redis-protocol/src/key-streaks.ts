// Keys whose streak is followed at once; more (every key failing alike: an outage) starts over.
const TRACKED_KEYS = 256;

/** Counts, per key, how many times in a row something went wrong with it. */
export interface KeyStreaks {
  /** One more in `key`'s streak: true when it reaches the threshold (the streaks then start over). */
  add(key: string): boolean;
  /** `key` went right: its streak ends. */
  end(key: string): void;
}

/**
 * Streaks of at most {@link TRACKED_KEYS} keys at a time, reaching `threshold`. A key's streak ends
 * when it goes right once; past the bound the record starts over (a streak may then need longer).
 */
export function createKeyStreaks(threshold: number): KeyStreaks {
  const streaks = new Map<string, number>();
  return {
    add(key) {
      const streak = (streaks.get(key) ?? 0) + 1;
      if (streak >= threshold) {
        streaks.clear();
        return true;
      }
      if (streaks.size >= TRACKED_KEYS && !streaks.has(key)) streaks.clear();
      streaks.set(key, streak);
      return false;
    },
    end(key) {
      if (streaks.size !== 0) streaks.delete(key);
    },
  };
}
