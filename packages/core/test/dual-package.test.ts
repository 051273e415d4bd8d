import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';
import { beforeAll, describe, expect, it } from 'vitest';
import { ADAPTER_ENTRY, MAIN_ENTRY } from './entry-lists.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const fixture = fileURLToPath(new URL('./fixtures/dual-package.mjs', import.meta.url));

beforeAll(() => {
  // The fixture loads the built package, as an application would.
  buildIfStale([root]);
});

describe('one registry per process, however the core is loaded', () => {
  it('import and require (node and default builds, and the adapter subpath) share the registry, stats, listeners, cap and fill context', () => {
    const report = JSON.parse(
      execFileSync(process.execPath, [fixture], { encoding: 'utf8', timeout: 30_000 }),
    );
    // Three separate copies of the code: the ESM chunk, dist/node.cjs and dist/index.cjs.
    expect(report.distinctCopies).toBe(3);
    expect(report.fills).toBe(1);
    expect(report.values).toEqual(Array(4).fill('shared value'));
    expect(report.inFlightSeenByEach).toEqual([1, 1, 1, 1]);
    expect(report.stats).toEqual(Array(4).fill({ misses: 4, coalescedWaits: 3, fills: 1 }));
    expect(report.eventsHeardAcrossCopies).toEqual(['fill']);
    expect(report.refresh).toEqual(Array(4).fill({ backgroundRefreshes: 1, backgroundRefreshesSkipped: 1 }));
    expect(report.selfCall).toBe('fill: TypeError');
    expect(report.crossCopyErrorGuard).toBe(true);
    // The built entries export exactly their allow-lists, whichever way they are loaded.
    for (const keys of Object.values(report.keys.main)) expect(keys).toEqual([...MAIN_ENTRY].sort());
    expect(Object.keys(report.keys.adapter)).toHaveLength(2);
    for (const keys of Object.values(report.keys.adapter)) expect(keys).toEqual([...ADAPTER_ENTRY].sort());
    // `@stampede/core/adapter` (ESM and CommonJS) shares the main entry's counters and listeners.
    expect(report.adapterFaults).toEqual({ heard: ['get', 'publish'], counted: [2, 2, 2, 2], byCache: 2 });
  });
});
