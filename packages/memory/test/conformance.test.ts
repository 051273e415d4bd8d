import { describeCacheConformance } from '@stampede/test-suite';
import { createMemoryCache } from '../src/index.js';

describeCacheConformance({
  name: 'memory',
  clock: 'fake',
  create: () => createMemoryCache({ max: 1_000 }),
});
