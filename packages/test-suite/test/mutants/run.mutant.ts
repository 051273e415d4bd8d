import { describeCacheConformance } from '@stampede/test-suite';
import { createMapStore, type MapStore } from '../map-cache.js';
import { MUTANTS } from './mutants.js';

// The suite on the mutant named by STAMPEDE_MUTANT (run by mutants.test.ts, one process each).
const name = process.env.STAMPEDE_MUTANT ?? 'none';
const mutant = MUTANTS[name];
if (mutant === undefined) throw new Error(`no mutant '${name}'`);
const stores = new WeakMap<object, MapStore>();

describeCacheConformance({
  name: `mutant: ${name}`,
  clock: 'fake',
  capabilities: { lock: true, extend: true, push: true, sync: true, roundTrip: false },
  create() {
    const store = createMapStore();
    const cache = mutant(store);
    stores.set(cache, store);
    return cache;
  },
  replica(of) {
    const store = stores.get(of);
    if (store === undefined) throw new Error('not a cache made by create()');
    return mutant(store);
  },
});
