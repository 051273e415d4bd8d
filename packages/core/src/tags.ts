import type { Cache } from './cache.js';
import { isBusUnheard, kindOf } from './errors.js';
import { emit, hasListeners } from './events.js';
import { type CacheState, stateOf } from './registry.js';
import { INVALIDATIONS_KEPT, invalidations } from './shared.js';
import { reportBackendError } from './stats.js';

/**
 * `option` as a list of distinct tags, or `undefined` for none (also for an empty list).
 *
 * @throws TypeError naming `name` when `option` is not an array of non-empty strings
 */
export function toTags(option: unknown, name: string): readonly string[] | undefined {
  if (option === undefined) return undefined;
  if (!Array.isArray(option)) {
    throw new TypeError(`${name} must be an array of non-empty strings; got ${kindOf(option)}`);
  }
  for (const tag of option) {
    if (typeof tag !== 'string' || tag.length === 0) {
      throw new TypeError(
        `${name} must be an array of non-empty strings; it holds ${tag === '' ? 'an empty string' : kindOf(tag)}`,
      );
    }
  }
  if (option.length === 0) return undefined;
  const distinct = [...new Set(option as string[])];
  return Object.freeze(distinct);
}

/** True when the two lists share a tag. */
function overlaps(a: readonly string[], b: ReadonlySet<string>): boolean {
  for (const tag of a) if (b.has(tag)) return true;
  return false;
}

/**
 * Stops every fill of this process in flight for a value carrying one of `tags` from being written
 * or joined (its callers still get its result), and makes later callers read afresh. Called for this
 * process's own invalidations, and by a tiered cache for another replica's (heard on the bus).
 */
export function supersedeTagged(state: CacheState, tags: ReadonlySet<string>): void {
  for (const flight of [...state.flights.values()]) {
    if (flight.tags !== undefined && overlaps(flight.tags, tags)) {
      flight.invalidated = true;
      flight.detach();
    }
    // The previous value fail-safe holds for it (or answered with after a soft timeout) may carry
    // the tag while the new value does not: the fill may still write, but that value answers nobody
    // any more.
    for (const previous of [flight.fallback?.entry, flight.early?.entry]) {
      if (previous?.tags !== undefined && overlaps(previous.tags, tags)) flight.fallbackInvalidated = true;
    }
  }
  // A read in flight may predate the invalidation, and which tags its entry carries is unknown yet.
  state.reads.clear();
}

/**
 * Numbers this call among the process's tag invalidations (see `Shared.invalidations`): a fill that
 * starts after it may be told so when it writes (`CacheSetOptions.afterInvalidations`).
 */
function noteInvalidation(tags: readonly string[]): void {
  const known = invalidations();
  const seq = ++known.seq;
  const { byTag } = known;
  for (const tag of tags) {
    byTag.delete(tag);
    byTag.set(tag, seq);
  }
  while (byTag.size > INVALIDATIONS_KEPT) {
    const oldest = byTag.entries().next();
    if (oldest.done === true) break;
    byTag.delete(oldest.value[0]);
    if (oldest.value[1] > known.floor) known.floor = oldest.value[1];
  }
}

/**
 * Whether a fill that started when `invalidationsBefore` invalidations had been made (see
 * `Flight.invalidationsBefore`) started after every invalidation of `tags` this process made.
 */
export function startedAfterInvalidations(tags: readonly string[], invalidationsBefore: number): boolean {
  const known = invalidations();
  if (known.floor > invalidationsBefore) return false;
  for (const tag of tags) {
    const seq = known.byTag.get(tag);
    if (seq !== undefined && seq > invalidationsBefore) return false;
  }
  return true;
}

/**
 * Invalidates every value that carried `tag` when it was written, on every replica, without
 * knowing their keys. See {@link invalidateTags}.
 *
 * @example
 * await getOrComputeWith(cache, 'product:7:page:1', { ttl: '5m', tags: ['product:7'] }, loadPage);
 * await invalidateTag(cache, 'product:7'); // every page of product 7 is a miss from now on
 */
export async function invalidateTag(cache: Cache, tag: string): Promise<void> {
  if (typeof tag !== 'string' || tag.length === 0) {
    throw new TypeError(
      `tag must be a non-empty string; got ${tag === '' ? 'an empty string' : kindOf(tag)}`,
    );
  }
  await invalidateTags(cache, [tag]);
}

/**
 * Invalidates every value that carried any of `tags` when it was written. Once the promise
 * resolves, no caller on any replica gets such a value created before the call: it reads as a miss
 * (and is filled again), stale-while-revalidate does not serve it, and a fill of this process in
 * flight at that moment still answers its callers but is not written (as with `invalidate`).
 *
 * The cost does not depend on how many values carry a tag: the cache records when each tag was
 * invalidated (for Redis, on Redis's own clock) and compares a value's creation time with its tags'
 * on read. An empty list does nothing.
 *
 * @throws TypeError naming `tags` for anything but an array of non-empty strings, and naming the
 * cache when it cannot invalidate tags (it has no `invalidateTags`), before any I/O
 * @throws the backend's error when the invalidation fails (also counted as a backend error)
 */
export async function invalidateTags(cache: Cache, tags: readonly string[]): Promise<void> {
  const list = toTags(tags, 'tags');
  const state = stateOf(cache);
  if (typeof cache.invalidateTags !== 'function') {
    throw new TypeError(
      `cache '${state.name}' cannot invalidate tags: it has no invalidateTags method (the memory, Redis, node-redis and Upstash caches have one)`,
    );
  }
  if (list === undefined) return;
  const set = new Set(list);
  noteInvalidation(list);
  supersedeTagged(state, set);
  try {
    await cache.invalidateTags(list);
  } catch (error) {
    // A tiered cache whose bus message failed did invalidate the tags (in the remote and in its L1):
    // counted as such, its failed publish counted already; the caller still learns of it.
    if (!isBusUnheard(error)) {
      reportBackendError(state.name, 'tags', undefined, error);
      throw error;
    }
    invalidated(state, list);
    throw error;
  }
  invalidated(state, list);
}

function invalidated(state: CacheState, list: readonly string[]): void {
  state.reads.clear();
  state.counters.tagInvalidations += list.length;
  if (hasListeners()) emit({ type: 'tag-invalidation', cache: state.name, tags: list });
}
