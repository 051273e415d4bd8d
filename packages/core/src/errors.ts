/** How a fill failed, as seen by one caller. */
export type CacheFillErrorKind = 'fill' | 'fill_failed' | 'timeout';

/** The stable `code` every {@link CacheFillError} carries, for checks across package copies. */
export const CACHE_FILL_ERROR_CODE = 'E_STAMPEDE_CACHE_FILL';

/**
 * The stable `code` every {@link CacheBusError} carries, for checks across package copies.
 */
export const CACHE_BUS_ERROR_CODE = 'E_STAMPEDE_BUS_UNHEARD';

/** @internal The same code under the name the tiered cache has used since it was written. */
export const BUS_ERROR_CODE = CACHE_BUS_ERROR_CODE;

/**
 * The error `invalidate`, `invalidateTag(s)`, `setValue` and a tiered cache's `delete` reject with
 * when the remote cache took the change but the tiered cache's invalidation bus could not tell the
 * other replicas (its connection down or timing out): their L1 copies may serve the old value until
 * `localTtl`. The change itself was made; repeat the call once the bus is back. `cause` is the
 * publish's own error. A fill never fails for the bus.
 *
 * Use {@link isCacheBusError} rather than `instanceof` when more than one copy of
 * `@stampede/core` may be installed.
 *
 * @example
 * try {
 *   await invalidateTag(cache, 'user:42');
 * } catch (error) {
 *   if (isCacheBusError(error)) scheduleRetry(); // the remote changed; the fleet was not told
 *   else throw error;
 * }
 */
export class CacheBusError extends Error {
  /** Always `'CacheBusError'`. */
  override readonly name = 'CacheBusError';
  /** Always {@link CACHE_BUS_ERROR_CODE}. */
  readonly code = CACHE_BUS_ERROR_CODE;
}

/**
 * True when `error` is a {@link CacheBusError}, from this copy of `@stampede/core` or any other (it
 * checks `name` and `code`, not only `instanceof`); `false` for anything else, whatever it is given.
 */
export function isCacheBusError(error: unknown): error is CacheBusError {
  return isErrorOf(error, CacheBusError, 'CacheBusError', CACHE_BUS_ERROR_CODE);
}

/**
 * Whether `error` is a tiered cache's `CacheBusError`: the change was made, only its bus message
 * failed, and that failure was counted already (as a `publish` backend error).
 */
export function isBusUnheard(error: unknown): boolean {
  return isCacheBusError(error);
}

// A type guard answers, whatever it is given: a Proxy whose traps throw is not one of ours.
function isErrorOf(
  error: unknown,
  type: abstract new (...args: never[]) => Error,
  name: string,
  code: string,
): boolean {
  try {
    if (error instanceof type) return true;
    if (typeof error !== 'object' || error === null) return false;
    const candidate = error as { name?: unknown; code?: unknown };
    return candidate.name === name && candidate.code === code;
  } catch {
    return false;
  }
}

/**
 * The error a `getOrCompute` caller gets when the value could not be computed.
 *
 * - `kind: 'fill'`: this caller ran the fill and it threw; `cause` and {@link CacheFillError.intoFill}
 *   give the fill's own error.
 * - `kind: 'fill_failed'`: this caller coalesced onto another caller's fill, which threw; `message`
 *   carries that error's message and `cause` the fill's original error (ES2022 `cause`, so
 *   `error.cause instanceof DbError` works for every caller), but `intoFill()` is `undefined` (it
 *   names the fill's own error only for the caller that ran it). Do not assume `intoFill()` is
 *   always defined. (When every caller left before the fill ended, `cause` is `undefined`.)
 * - A fill result that fails `checkValue` is a failed fill: kind `'fill'` (or `'fill_failed'` for
 *   coalesced callers) with the validator's issues (an array of `{ message, path? }`) as `cause`.
 * - `kind: 'timeout'`: the fill did not settle within `fillTimeout`; every caller of it gets this.
 *
 * Use {@link isCacheFillError} rather than `instanceof` when more than one copy of
 * `@stampede/core` may be installed.
 */
export class CacheFillError extends Error {
  /** Always `'CacheFillError'`. */
  override readonly name = 'CacheFillError';
  /** Always {@link CACHE_FILL_ERROR_CODE}. */
  readonly code = CACHE_FILL_ERROR_CODE;
  /** How the fill failed for this caller. */
  readonly kind: CacheFillErrorKind;
  /** The cache key whose fill failed. */
  readonly key: string;

  constructor(kind: CacheFillErrorKind, key: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
    this.key = key;
  }

  /** The fill's own error for kind `'fill'`; `undefined` for `'fill_failed'` and `'timeout'`. */
  intoFill(): unknown | undefined {
    return this.kind === 'fill' ? this.cause : undefined;
  }
}

/**
 * True when `error` is a {@link CacheFillError}, from this copy of `@stampede/core` or any other
 * (it checks `name` and `code`, not only `instanceof`).
 */
export function isCacheFillError(error: unknown): error is CacheFillError {
  return isErrorOf(error, CacheFillError, 'CacheFillError', CACHE_FILL_ERROR_CODE);
}

/** The message of whatever was thrown (an `Error`'s message, else its text), never itself throwing. */
export function messageOf(error: unknown): string {
  if (typeof error === 'string') return error;
  // Reading what was thrown runs its code (a `message` getter, a Proxy's traps, a `toString`): a
  // throw there must not escape from the code that is handling the first error (a fill's failure
  // whose callers would otherwise never settle, a listener's).
  try {
    if (error instanceof Error) {
      const message = error.message;
      return typeof message === 'string' ? message : String(message);
    }
    return String(error);
  } catch {
    return UNREADABLE_MESSAGE;
  }
}

/** What {@link messageOf} answers for a thrown value whose message cannot be read. */
const UNREADABLE_MESSAGE = 'an error whose message could not be read';

/** How a bad argument is named in a `TypeError`: `'null'`, or its `typeof`. */
export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}

/**
 * Throws a `TypeError` naming the first own enumerable property of `bag` that is not in `known`: a
 * misspelt option (`distributedFilLock`, `failsafe`) would otherwise be ignored, and the protection
 * it asked for silently absent. Options built in a variable or read from a config file escape
 * TypeScript's excess-property check. The message suggests the known name it most likely meant.
 *
 * @param name - how the bag is named in the message (`'options'`, `'options.failSafe'`)
 * @throws TypeError also when `bag` is not an object (`null`, an array, a primitive), naming what it is
 */
export function checkKnownKeys(
  bag: unknown,
  known: ReadonlySet<string>,
  name: string,
): asserts bag is object {
  // An array passes `typeof` as an object and has no option names: `[]` would read as no options.
  if (typeof bag !== 'object' || bag === null || Array.isArray(bag)) {
    throw new TypeError(`${name} must be an object; got ${kindOf(bag)}`);
  }
  for (const key in bag) {
    if (known.has(key) || !Object.hasOwn(bag, key)) continue;
    throw new TypeError(`${name}.${key} is not an option${suggestion(key, known)}`);
  }
}

function suggestion(key: string, known: ReadonlySet<string>): string {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 4)) + 1;
  for (const candidate of known) {
    const distance = candidate.toLowerCase() === key.toLowerCase() ? 0 : editDistance(key, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  const names = [...known].join(', ');
  return best === undefined ? ` (known: ${names})` : ` (did you mean '${best}'?)`;
}

/** Levenshtein distance (the names compared are a few dozen characters at most). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
