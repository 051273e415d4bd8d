// The seed's `bookmark_count` example, twice: through stampede, and as plain cache-aside for contrast.
// Plus what the page's other panels need: an update (a write, then an invalidation), fail-safe for
// the database outage, and the short-TTL keys the steady load reads.
import { getOrComputeWith, getValue, invalidate, invalidateTag, setValue } from '@stampede/core';

export const KEY = 'bookmark_count';
/** The unprotected path caches under its own key so the two never serve each other's values. */
export const UNPROTECTED_KEY = 'bookmark_count:unprotected';

/**
 * Fail-safe on the protected path when the page's switch asks for it: a failing query answers with
 * the last good count, re-armed for `throttle` so the database is retried once per 5 s per key
 * (fleet-wide with the lock), and a query still running after `softTimeout` (a stalled database)
 * answers with it too while the query goes on in the background.
 */
export const FAIL_SAFE = /** @type {const} */ ({ maxStale: '10m', throttle: '5s' });
export const SOFT_TIMEOUT = /** @type {const} */ ('250ms');

/**
 * The tag every cached value derived from the bookmarks table carries (the count, its unprotected
 * copy, the steady load's keys): an update drops them all with one `invalidateTag`.
 */
export const TAG = 'bookmarks';
const TAGS = [TAG];

/** What the update runs after its write (shown on the page). */
export const UPDATE_INVALIDATION = `invalidateTag(cache, '${TAG}')`;

/** The steady load's TTL: short, so a 10 s run crosses several expiries. */
export const STEADY_TTL = /** @type {const} */ ('2s');
/** How the steady load's key is cached: TTL only, with stale-while-revalidate, or with early refresh. */
export const STEADY_VARIANTS = /** @type {const} */ (['plain', 'swr', 'early']);
/** @typedef {typeof STEADY_VARIANTS[number]} SteadyVariant */

/** @param {SteadyVariant} variant */
export const steadyKey = (variant) => `bookmark_count:steady:${variant}`;

/**
 * @typedef {object} CountOptions
 * @property {boolean} lock - the distributed fill lock (Redis only)
 * @property {boolean} failSafe - answer with the last good count when the database fails
 * @property {SteadyVariant} [steady] - read the steady load's key instead of the main one
 */

/**
 * @typedef {object} BookmarkCounter
 * @property {(options: CountOptions) => Promise<number>} protectedCount
 * @property {() => Promise<number>} unprotectedCount
 * @property {() => Promise<void>} invalidateAll
 * @property {() => Promise<void>} expireAll - the count's TTL lapses now; the entry stays as the last good value
 * @property {(variant: SteadyVariant) => Promise<void>} invalidateSteady
 * @property {(variant: SteadyVariant) => Promise<void>} expireSteady - as `expireAll`, for a steady load's key
 * @property {() => Promise<void>} invalidateTagged - `invalidateTag(cache, 'bookmarks')` alone (the update's second half)
 * @property {() => Promise<number>} update - adds a bookmark, invalidates every value tagged `bookmarks`; returns the new total
 * @property {() => { protected: number, unprotected: number, steady: number, lastServed: number | null }} requests
 */

/**
 * @param {import('@stampede/core').Cache} cache
 * @param {import('./db.mjs').BookmarkDb} db
 * @param {{ ttl: string, swr: string | undefined }} options
 * @returns {BookmarkCounter}
 */
export function createBookmarkCounter(cache, db, { ttl, swr }) {
  const requests = { protected: 0, unprotected: 0, steady: 0 };
  /**
   * The last count the protected path answered on this replica (what the fleet table shows); null
   * until it has answered once, so that /actuator/metrics always carries the field.
   * @type {number | null}
   */
  let lastServed = null;
  const ttlValue = /** @type {import('@stampede/core').Duration} */ (ttl);
  const swrValue = /** @type {import('@stampede/core').Duration | undefined} */ (swr);
  const fill = () => db.countBookmarks();

  /** @param {CountOptions} options @returns {import('@stampede/core').GetOrComputeOptions} */
  const optionsFor = ({ lock, failSafe, steady }) => {
    const safety = failSafe ? { failSafe: FAIL_SAFE, softTimeout: SOFT_TIMEOUT } : {};
    if (steady === undefined) {
      return {
        ttl: ttlValue,
        staleWhileRevalidate: swrValue,
        distributedFillLock: lock,
        tags: TAGS,
        ...safety,
      };
    }
    return {
      ttl: STEADY_TTL,
      staleWhileRevalidate: steady === 'swr' ? STEADY_TTL : undefined,
      // XFetch: a fresh hit refreshes in the background with a probability that grows as expiry
      // nears, scaled by how long the last fill took, so a key read this often is refreshed before
      // it expires and no reader waits.
      earlyRefresh: steady === 'early' ? true : undefined,
      distributedFillLock: lock,
      tags: TAGS,
      ...safety,
    };
  };

  /** The last count the protected path answered, per key. @type {Map<string, number>} */
  const lastByKey = new Map();

  /**
   * The count's TTL lapses now (the page does not make you wait 30 s for it): its value is written
   * back expired, and kept for fail-safe's `maxStale`. A value already expired but still held is
   * left as it is. When the cache no longer holds the key at all (it was written without fail-safe,
   * so only kept for its TTL), the count this replica last served for it stands in for it, as if
   * fail-safe had been on when it was written.
   * @param {string} key
   */
  const expire = async (key) => {
    let value = await getValue(cache, key);
    if (value === undefined) {
      if ((await getValue(cache, key, { allowStale: true })) !== undefined) return;
      value = lastByKey.get(key);
      if (value === undefined) return;
    }
    await setValue(cache, key, value, { ttl: 1, staleWhileRevalidate: FAIL_SAFE.maxStale, tags: TAGS });
  };

  return {
    async protectedCount(options) {
      if (options.steady === undefined) requests.protected++;
      else requests.steady++;
      const key = options.steady === undefined ? KEY : steadyKey(options.steady);
      const count = await getOrComputeWith(cache, key, optionsFor(options), fill);
      lastByKey.set(key, count);
      if (options.steady === undefined) lastServed = count;
      return count;
    },
    // Cache-aside as it is usually written: read, and on a miss query and write. Every request
    // that misses before the first write lands queries the database itself.
    async unprotectedCount() {
      requests.unprotected++;
      const cached = await getValue(cache, UNPROTECTED_KEY);
      if (typeof cached === 'number') return cached;
      const count = await db.countBookmarks();
      await setValue(cache, UNPROTECTED_KEY, count, { ttl: ttlValue, tags: TAGS });
      return count;
    },
    async invalidateAll() {
      await Promise.all([invalidate(cache, KEY), invalidate(cache, UNPROTECTED_KEY)]);
    },
    // An invalidated key never comes back through fail-safe (the value is known to be wrong), so a
    // herd during an outage expires the count instead: same value, its freshness over, kept for
    // fail-safe's `maxStale`.
    async expireAll() {
      await Promise.all([expire(KEY), invalidate(cache, UNPROTECTED_KEY)]);
    },
    async invalidateSteady(variant) {
      await invalidate(cache, steadyKey(variant));
    },
    expireSteady: (variant) => expire(steadyKey(variant)),
    async update() {
      const total = db.addBookmark();
      await invalidateTag(cache, TAG);
      return total;
    },
    invalidateTagged: () => invalidateTag(cache, TAG),
    requests: () => ({ ...requests, lastServed }),
  };
}
