import { describeCacheConformance } from '@stampede/test-suite';
import { createMapCache, createMapStore, type MapStore } from './map-cache.js';

// Which store each cache uses, so that `replica` can open a second cache on the same one.
const stores = new WeakMap<object, MapStore>();

describeCacheConformance({
  name: 'map',
  // Expiry follows Date.now(): the suite drives it with fake timers instead of waiting.
  clock: 'fake',
  capabilities: { lock: true, extend: true, push: true, sync: true, roundTrip: false },
  create() {
    const store = createMapStore();
    const cache = createMapCache({ store });
    stores.set(cache, store);
    return cache;
  },
  replica(of) {
    const store = stores.get(of);
    if (store === undefined) throw new Error('not a cache made by create()');
    return createMapCache({ store });
  },
});
