import type { Cache, FillLock } from '@stampede/core';
import { checkCacheKey, checkCacheWrite, checkFillDoneArguments, checkLockTtl } from '@stampede/core/adapter';
import { describeCacheConformance } from '../src/index.js';
import { createMapCache, createMapStore, type MapStore } from './map-cache.js';

// The Map cache of docs/adapters.md with the adapter kit's argument checks in front of each of its
// methods: what an adapter outside this repository does to pass the `checksArguments` cases. (The
// guide's example leaves them out to stay short: its own run declares no `checksArguments`.)

/** A lock handle whose `extend` checks its TTL first. */
function checkedLock(lock: FillLock | undefined): FillLock | undefined {
  if (lock === undefined) return undefined;
  const { extend } = lock;
  if (extend === undefined) return lock;
  return {
    release: (outcome) => lock.release(outcome),
    extend(ttl) {
      checkLockTtl(ttl);
      return extend.call(lock, ttl);
    },
  };
}

function createCheckedMapCache(store: MapStore): Cache {
  const cache = createMapCache({ store });
  const { tryAcquireFillLock, onFillDone } = cache;
  if (tryAcquireFillLock === undefined || onFillDone === undefined) throw new Error('not a map cache');
  return {
    name: cache.name,
    get(key) {
      checkCacheKey(key);
      return cache.get(key);
    },
    set(key, entry, options) {
      checkCacheKey(key);
      checkCacheWrite(entry, options);
      return cache.set(key, entry, options);
    },
    delete(key) {
      checkCacheKey(key);
      return cache.delete(key);
    },
    tryAcquireFillLock(key, ttl) {
      checkCacheKey(key);
      checkLockTtl(ttl);
      // The Map cache answers at once: no promise to wait for.
      return checkedLock(tryAcquireFillLock.call(cache, key, ttl) as FillLock | undefined);
    },
    onFillDone(key, listener, ready) {
      checkFillDoneArguments(key, listener, ready);
      return onFillDone.call(cache, key, listener, ready);
    },
  };
}

const stores = new WeakMap<object, MapStore>();

describeCacheConformance({
  name: 'map, with argument checks',
  clock: 'fake',
  capabilities: { lock: true, extend: true, push: true, sync: true, roundTrip: false, checksArguments: true },
  create() {
    const store = createMapStore();
    const cache = createCheckedMapCache(store);
    stores.set(cache, store);
    return cache;
  },
  replica(of) {
    const store = stores.get(of);
    if (store === undefined) throw new Error('not a cache made by create()');
    return createCheckedMapCache(store);
  },
});
