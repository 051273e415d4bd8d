// The seed's `bookmark_count` example, twice: through stampede, and as plain cache-aside for contrast.
import { getOrComputeWith, getValue, invalidate, setValue } from '@stampede/core';

export const KEY = 'bookmark_count';
/** The unprotected path caches under its own key so the two never serve each other's values. */
export const UNPROTECTED_KEY = 'bookmark_count:unprotected';

/**
 * @typedef {object} BookmarkCounter
 * @property {(options: { lock: boolean }) => Promise<number>} protectedCount
 * @property {() => Promise<number>} unprotectedCount
 * @property {() => Promise<void>} invalidateAll
 * @property {() => { protected: number, unprotected: number }} requests
 */

/**
 * @param {import('@stampede/core').Cache} cache
 * @param {import('./db.mjs').BookmarkDb} db
 * @param {{ ttl: string, swr: string | undefined }} options
 * @returns {BookmarkCounter}
 */
export function createBookmarkCounter(cache, db, { ttl, swr }) {
  const requests = { protected: 0, unprotected: 0 };
  const ttlValue = /** @type {import('@stampede/core').Duration} */ (ttl);
  const swrValue = /** @type {import('@stampede/core').Duration | undefined} */ (swr);
  const fill = () => db.countBookmarks();
  return {
    protectedCount({ lock }) {
      requests.protected++;
      return getOrComputeWith(
        cache,
        KEY,
        { ttl: ttlValue, staleWhileRevalidate: swrValue, distributedFillLock: lock },
        fill,
      );
    },
    // Cache-aside as it is usually written: read, and on a miss query and write. Every request
    // that misses before the first write lands queries the database itself.
    async unprotectedCount() {
      requests.unprotected++;
      const cached = await getValue(cache, UNPROTECTED_KEY);
      if (typeof cached === 'number') return cached;
      const count = await db.countBookmarks();
      await setValue(cache, UNPROTECTED_KEY, count, { ttl: ttlValue });
      return count;
    },
    async invalidateAll() {
      await Promise.all([invalidate(cache, KEY), invalidate(cache, UNPROTECTED_KEY)]);
    },
    requests: () => ({ ...requests }),
  };
}
