import type { StampedeListener } from './events.js';
import type { CacheState } from './registry.js';
import type { StampedeStats } from './stats.js';

/**
 * Everything the core keeps process-wide. It lives on `globalThis` under a `Symbol.for` key, not in
 * module variables, because one process can load the core more than once: through `import` and
 * `require` (an ESM app with a CommonJS dependency that also uses stampede), or as two installed
 * copies of the same major version. Each copy then has its own modules, but they must share one
 * single-flight registry, one set of counters, one list of listeners and one refresh cap, or one key
 * gets two fills and the stats tell half the story.
 *
 * The version in the key is the layout of this object, of the per-cache state and of flights. A
 * change that an older copy could not read bumps it (copies with different layouts then keep apart);
 * adding a field does not, and every copy creates a field it needs but does not find.
 */
export interface Shared {
  readonly version: 1;
  /** Counters by cache name (`stats.ts`). */
  readonly counters: Map<string, StampedeStats>;
  /** Event listeners (`events.ts`); a copy-on-emit array. */
  readonly listeners: StampedeListener[];
  /** The process-wide cap on background refreshes and how many run now (`background.ts`). */
  readonly refresh: { max: number; active: number };
  /** Per-cache state of caches that are frozen (others carry it themselves, `registry.ts`). */
  readonly frozenStates: WeakMap<object, CacheState>;
}

const SHARED_KEY = Symbol.for('@stampede/core/shared/v1');

/** The symbol under which each cache object carries its state, shared by every copy of the core. */
export const STATE_KEY: unique symbol = Symbol.for('@stampede/core/state/v1');

function create(): Shared {
  return {
    version: 1,
    counters: new Map(),
    listeners: [],
    refresh: { max: 64, active: 0 },
    frozenStates: new WeakMap(),
  };
}

function load(): Shared {
  const holder = globalThis as { [SHARED_KEY]?: Shared };
  const found = holder[SHARED_KEY];
  if (found !== undefined) return found;
  const shared = create();
  // Not writable or enumerable: nothing should replace it, and it should not show up in the global
  // object's listings.
  Object.defineProperty(holder, SHARED_KEY, { value: shared, enumerable: false, writable: false });
  return shared;
}

/** The process-wide state, created by the first copy of the core that loads. */
export const shared: Shared = load();
