import { describe, expect, it } from 'vitest';
import type * as AdapterTypes from '../src/adapter.js';
import * as adapter from '../src/adapter.js';
import type * as MainTypes from '../src/index.js';
import * as main from '../src/index.js';
import { ADAPTER_ENTRY, MAIN_ENTRY } from './entry-lists.js';

// The runtime names of each entry, held against an explicit list: a name added to the main entry
// (or moved back from the adapter subpath) fails here until the list, and so the boundary, is
// changed on purpose. The built package is held against the same lists in dual-package.test.ts.
describe('@stampede/core: the users API', () => {
  it('exports exactly the user API', () => {
    expect(Object.keys(main).sort()).toEqual([...MAIN_ENTRY].sort());
  });

  it('the node entry exports the same names as the runtime-neutral one', async () => {
    const node = await import('../src/node.js');
    expect(Object.keys(node).sort()).toEqual([...MAIN_ENTRY].sort());
  });

  it('exports nothing from the adapter kit', () => {
    const leaked = Object.keys(adapter).filter((name) => name in main);
    expect(leaked).toEqual([]);
  });
});

describe('@stampede/core/adapter: the adapter kit', () => {
  it('exports exactly the adapter kit', () => {
    expect(Object.keys(adapter).sort()).toEqual([...ADAPTER_ENTRY].sort());
  });

  it('the Cache contract types are the same from both entries', () => {
    const entry: MainTypes.CacheEntry = { value: 1, createdAt: 0, freshUntil: 1, staleUntil: 1 };
    const same: AdapterTypes.CacheEntry = entry;
    const cache: AdapterTypes.Cache = { get: () => same, set: () => {}, delete: () => {} };
    const back: MainTypes.Cache = cache;
    const lock: MainTypes.FillLock = { release: (_outcome: AdapterTypes.FillOutcome) => {} };
    const options: AdapterTypes.CacheSetOptions = { ttl: 1 } satisfies MainTypes.CacheSetOptions;
    const later: MainTypes.MaybePromise<number> = 1 satisfies AdapterTypes.MaybePromise<number>;
    expect([back.get('k'), typeof lock.release, options.ttl, later]).toEqual([entry, 'function', 1, 1]);
  });
});
