import { describeCacheConformance } from '@stampede/test-suite';
import { createMemoryCache } from '../src/index.js';

describeCacheConformance({
  name: 'memory',
  clock: 'fake',
  // One process's memory: no lock, no push, no replica; it answers synchronously and keeps values
  // by reference (no roundTrip). Its methods refuse bad arguments with the adapter kit's checks, and
  // it counts its changes (CHANGES).
  capabilities: {
    lock: false,
    extend: false,
    push: false,
    sync: true,
    roundTrip: false,
    tags: true,
    checksArguments: true,
    changes: true,
  },
  create: () => createMemoryCache({ max: 1_000 }),
});
