import { describeCacheConformance } from '../src/index.js';
import { createMapCache, createMapStore, type MapStore } from './example-adapter.js';

// The example adapter of docs/adapters.md, run as a third party would (a relative import here, the package name there).
const stores = new WeakMap<object, MapStore>();

describeCacheConformance({
  name: 'example Map adapter',
  clock: 'fake',
  capabilities: { lock: true, extend: true, push: true, sync: true, roundTrip: false },
  create() {
    const store = createMapStore();
    const cache = createMapCache({ store });
    stores.set(cache, store);
    return cache;
  },
  // Another replica: a second cache object on the same store.
  replica: (of) => createMapCache({ store: stores.get(of) }),
});
