import { entryFor, isThenable, physicalTtl, readEntry } from './backend.js';
import type { Cache } from './cache.js';
import { type CheckValue, checkedEntry, toValueCheck } from './check-value.js';
import { type Duration, toOptionalMilliseconds } from './duration.js';
import { checkKnownKeys, isBusUnheard, kindOf } from './errors.js';
import { recordInvalidation, settleInvalidation } from './fail-safe.js';
import { checkKey } from './get-or-compute.js';
import { type CacheState, stateOf } from './registry.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import { reportBackendError } from './stats.js';
import { toTags } from './tags.js';

/** Options of {@link setValue}. */
export interface SetValueOptions {
  /** How long the value is fresh. @default undefined (never expires) */
  ttl?: Duration | undefined;
  /** Grace after `ttl` during which `getOrComputeWith` may serve it stale. @default undefined */
  staleWhileRevalidate?: Duration | undefined;
  /**
   * Groups the value belongs to, for `invalidateTag` (see `GetOrComputeOptions.tags`).
   * @default undefined (no tags)
   */
  tags?: readonly string[] | undefined;
}

/** Options of {@link getValue}. */
export interface GetValueOptions {
  /** Also return a value past its `ttl` but within its stale-while-revalidate grace. @default false */
  allowStale?: boolean | undefined;
  /**
   * A Standard Schema or a function (see `GetOrComputeOptions.checkValue`): a cached value that
   * fails reads as `undefined` (counted as `checkValueFailures`, with a `check-value` event); with a
   * schema, the value returned is its output.
   * @default undefined (no check)
   */
  checkValue?: CheckValue | undefined;
}

const GET_VALUE_OPTIONS: ReadonlySet<string> = new Set(['allowStale', 'checkValue']);
const SET_VALUE_OPTIONS: ReadonlySet<string> = new Set(['ttl', 'staleWhileRevalidate', 'tags']);

/**
 * An options argument is absent or an object (not, say, a ttl passed where the options go) holding
 * only the options `known`.
 */
function checkOptionsBag(options: unknown, known: ReadonlySet<string>): void {
  if (options !== undefined) checkKnownKeys(options, known, 'options');
}

/**
 * Stops any fill in flight for `key` from being written or joined: the value changed under it.
 * Returns the time of the change's record, for `settleInvalidation` once the backend has it.
 */
function supersede(state: CacheState, key: string): number {
  // ...and an entry read before now must not come back as a fail-safe fallback.
  const at = recordInvalidation(state, key);
  supersedeFlights(state, key);
  return at;
}

/**
 * {@link supersede} without the fail-safe record: for a change another replica made (a tiered cache
 * calls it when the bus tells it), which this replica hears some time after it was made, so that
 * its own clock would date the change too late (the very value another replica's `setValue` wrote
 * would be refused as a fallback). A fallback is confirmed by a fresh read before it answers anyway.
 */
export function supersedeFlights(state: CacheState, key: string): void {
  // A read already in flight may predate this change: later callers must read afresh.
  state.reads.delete(key);
  const flight = state.flights.get(key);
  if (flight !== undefined) {
    flight.invalidated = true;
    flight.detach();
  }
}

async function settleBackend(
  state: CacheState,
  key: string,
  operation: 'set' | 'delete',
  run: () => unknown,
) {
  try {
    const result = run();
    if (isThenable(result)) await result;
  } catch (error) {
    // A tiered cache's unheard change was counted as its failed publish.
    if (!isBusUnheard(error)) reportBackendError(state.name, operation, key, error);
    throw error;
  }
}

/**
 * Reads the value `getOrCompute` stored for `key`, without filling. A backend fault reads as a miss
 * (and is counted), as it does in `getOrCompute`. With a Standard Schema as `checkValue` the result
 * is typed by the schema's output.
 *
 * @returns the fresh value, or `undefined`
 */
export function getValue<S extends StandardSchemaV1>(
  cache: Cache,
  key: string,
  options: GetValueOptions & { readonly checkValue: S },
): Promise<StandardSchemaV1.InferOutput<S> | undefined>;
export function getValue<T = unknown>(
  cache: Cache,
  key: string,
  options?: GetValueOptions,
): Promise<T | undefined>;
export async function getValue<T = unknown>(
  cache: Cache,
  key: string,
  options?: GetValueOptions,
): Promise<T | undefined> {
  checkKey(key);
  checkOptionsBag(options, GET_VALUE_OPTIONS);
  const allowStale = options?.allowStale;
  if (allowStale !== undefined && typeof allowStale !== 'boolean') {
    throw new TypeError(`options.allowStale must be a boolean; got ${kindOf(allowStale)}`);
  }
  const check = toValueCheck(options?.checkValue, 'options.checkValue');
  const state = stateOf(cache);
  const read = await readEntry(state, key);
  const entry = check === undefined ? read : await checkedEntry(state, key, read, check);
  if (entry === undefined) return undefined;
  const now = Date.now();
  if (now < entry.freshUntil || (allowStale === true && now < entry.staleUntil)) return entry.value as T;
  return undefined;
}

/**
 * Stores `value` for `key` exactly as `getOrCompute` would have. A fill already in flight for the
 * key still answers its callers but is not written over this value.
 *
 * @throws TypeError when `value` is `undefined` (it cannot be cached) or an argument is invalid
 * @throws the backend's error when the write fails (also counted as a backend error)
 */
export async function setValue<T>(
  cache: Cache,
  key: string,
  value: T,
  options?: SetValueOptions,
): Promise<void> {
  checkKey(key);
  if (value === undefined) throw new TypeError('value must not be undefined (undefined is never cached)');
  checkOptionsBag(options, SET_VALUE_OPTIONS);
  const ttl = toOptionalMilliseconds(options?.ttl, 'options.ttl');
  const grace = toOptionalMilliseconds(options?.staleWhileRevalidate, 'options.staleWhileRevalidate') ?? 0;
  const tags = toTags(options?.tags, 'options.tags');
  const state = stateOf(cache);
  const at = supersede(state, key);
  const entry = entryFor(value, Date.now(), { ttl, grace, tags });
  await settleBackend(state, key, 'set', () =>
    cache.set(key, entry, { ttl: physicalTtl({ ttl, grace }), direct: true }),
  );
  // A failed change settles nothing: what the cache holds then may still predate it.
  settleInvalidation(state, key, at);
}

/**
 * Removes `key`. A fill in flight for it still answers its callers, but its result is not written
 * (an invalidation is never undone by an older fill), and the next caller starts a new fill.
 *
 * @throws the backend's error when the delete fails (also counted as a backend error)
 */
export async function invalidate(cache: Cache, key: string): Promise<void> {
  checkKey(key);
  const state = stateOf(cache);
  const at = supersede(state, key);
  await settleBackend(state, key, 'delete', () => cache.delete(key));
  settleInvalidation(state, key, at);
}
