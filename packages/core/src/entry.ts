import type { CacheEntry } from './cache.js';
import { kindOf } from './errors.js';

// Every entry the core and the adapters built on it make comes from here, as an object literal of
// one of four fixed shapes (without or with `delta`, without or with `tags`, in the order of
// `CacheEntry`'s required fields first). A copy made by spreading (`{ ...entry, value }`) gets a
// hidden class of its own in V8, and every later hit on it paid some 40 ns more (a hit is about
// 100 ns): the entries a tiered cache kept from Redis, the tagged ones, the fail-safe ones. Each
// also has, from the start, the (non-enumerable) slot where its first hit keeps its settled promise.

/** The fields {@link changeEntry} may replace. */
export interface EntryChanges {
  readonly value?: unknown;
  readonly createdAt?: number | undefined;
  readonly freshUntil?: number | undefined;
  readonly staleUntil?: number | undefined;
  readonly tags?: readonly string[] | undefined;
}

/**
 * The key of the settled promise a hit keeps on its entry (get-or-compute.ts): every later hit of
 * the entry returns that promise. A registered symbol, so that every copy of the core loaded in the
 * process (ESM and CommonJS) uses the same one.
 */
export const SETTLED: unique symbol = Symbol.for('stampede.settled') as never;

// The room for it, made when the entry is built: the property added by the first hit instead gave
// every entry a second hidden class, and code compiled for entries already read was thrown away at
// the first read of each new one. Not enumerable, so neither a spread copy nor JSON carries it;
// writable, for that first hit.
const SETTLED_SLOT: PropertyDescriptor = {
  value: undefined,
  writable: true,
  enumerable: false,
  configurable: false,
};

/**
 * A {@link CacheEntry} of one of the fixed shapes: `delta` and `tags` are present only when given.
 * Adapters that decode entries should build them with this (or {@link changeEntry}) rather than by
 * spreading, so that hits on them stay as fast as on the core's own.
 *
 * @param createdAt - epoch milliseconds
 * @param freshUntil - epoch milliseconds; `Infinity` for never
 * @param staleUntil - epoch milliseconds; `Infinity` for never
 * @param delta - how long the fill ran, in milliseconds (`>= 0`); omitted for a value not filled
 * @throws TypeError naming the argument when a time or `delta` is not a number or is `NaN` (an entry
 * with a `NaN` time would silently read as a miss forever), RangeError when `delta` is negative
 */
export function createEntry(
  value: unknown,
  createdAt: number,
  freshUntil: number,
  staleUntil: number,
  delta?: number,
  tags?: readonly string[],
): CacheEntry {
  checkNumber(createdAt, 'createdAt');
  checkNumber(freshUntil, 'freshUntil');
  checkNumber(staleUntil, 'staleUntil');
  if (delta !== undefined) {
    checkNumber(delta, 'delta');
    if (delta < 0) throw new RangeError(`createEntry: delta must be >= 0 (milliseconds), got ${delta}`);
  }
  return buildEntry(value, createdAt, freshUntil, staleUntil, delta, tags);
}

function checkNumber(value: unknown, name: string): void {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(
      `createEntry: ${name} must be a number of milliseconds, got ${typeof value === 'number' ? 'NaN' : kindOf(value)}`,
    );
  }
}

/**
 * {@link createEntry} without its argument checks, for the core's own entries, whose times it has
 * computed or already checked (and for {@link changeEntry}, whose fields come from an entry).
 */
export function buildEntry(
  value: unknown,
  createdAt: number,
  freshUntil: number,
  staleUntil: number,
  delta?: number,
  tags?: readonly string[],
): CacheEntry {
  let entry: CacheEntry;
  if (tags === undefined) {
    entry =
      delta === undefined
        ? { value, createdAt, freshUntil, staleUntil }
        : { value, createdAt, freshUntil, staleUntil, delta };
  } else {
    entry =
      delta === undefined
        ? { value, createdAt, freshUntil, staleUntil, tags }
        : { value, createdAt, freshUntil, staleUntil, delta, tags };
  }
  Object.defineProperty(entry, SETTLED, SETTLED_SLOT);
  return entry;
}

/** `entry` with the fields in `changes` replaced: a new entry built by {@link createEntry}. */
export function changeEntry(entry: CacheEntry, changes: EntryChanges): CacheEntry {
  return buildEntry(
    'value' in changes ? changes.value : entry.value,
    changes.createdAt ?? entry.createdAt,
    changes.freshUntil ?? entry.freshUntil,
    changes.staleUntil ?? entry.staleUntil,
    entry.delta,
    'tags' in changes ? changes.tags : entry.tags,
  );
}
