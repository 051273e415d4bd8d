import type { CacheBus, CacheBusHandlers, CacheEntry, CacheSetOptions } from './cache.js';
import { toPositiveMilliseconds } from './duration.js';
import { kindOf } from './errors.js';
import { toTags } from './tags.js';

// The argument checks of a `Cache`'s own methods, for every adapter (and a tiered cache) to run
// before it reads or writes anything: the core always passes valid arguments, but a `Cache` is also
// called directly, and there a bad one must be refused with a message that names it instead of
// being stored (a malformed entry), iterated (a string of tags) or failing inside the backend with
// a message that names nothing. Each check costs a few `typeof`s and allocates nothing on success,
// but for a list of tags (checked by the core's own `toTags`, which builds its distinct copy).

/** How a bad string is named: `'an empty string'`, or what {@link kindOf} says. */
const describeString = (value: unknown): string => (value === '' ? 'an empty string' : kindOf(value));

/**
 * Throws unless `key` is a non-empty string: what `get`, `set`, `delete`, `tryAcquireFillLock`,
 * `onFillDone` ... of a `Cache` take.
 *
 * @param name - how the argument is named in the message
 * @throws TypeError `key must be a non-empty string; got number` (or `got an empty string`)
 * @example
 * get(key) {
 *   checkCacheKey(key);
 *   return store.get(key);
 * }
 */
export function checkCacheKey(key: unknown, name = 'key'): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError(`${name} must be a non-empty string; got ${describeString(key)}`);
  }
}

/**
 * Throws unless `entry` is a {@link CacheEntry}: an object whose `value` is not `undefined`, whose
 * `createdAt`, `freshUntil` and `staleUntil` are numbers (not `NaN`; `Infinity` is "never"), whose
 * `delta` is `undefined` or a number `>= 0`, and whose `tags` are `undefined` or an array of
 * non-empty strings. Other properties are left alone (an adapter may keep its own on an entry).
 *
 * @param name - how the argument is named in the message (`'options.renews'` for a re-armed entry)
 * @throws TypeError naming the argument or its field (`entry.createdAt must be a number of
 * milliseconds; got undefined`), RangeError for a negative `delta`
 */
export function checkCacheEntry(entry: unknown, name = 'entry'): asserts entry is CacheEntry {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new TypeError(`${name} must be a CacheEntry object; got ${kindOf(entry)}`);
  }
  const candidate = entry as Partial<Record<keyof CacheEntry, unknown>>;
  if (candidate.value === undefined) {
    throw new TypeError(`${name}.value must not be undefined (undefined is never cached; null is a value)`);
  }
  checkTime(candidate.createdAt, name, 'createdAt');
  checkTime(candidate.freshUntil, name, 'freshUntil');
  checkTime(candidate.staleUntil, name, 'staleUntil');
  const delta = candidate.delta;
  if (delta !== undefined) {
    checkTime(delta, name, 'delta');
    if (delta < 0) throw new RangeError(`${name}.delta must be >= 0 (milliseconds); got ${delta}`);
  }
  toTags(candidate.tags, `${name}.tags`);
}

function checkTime(value: unknown, name: string, field: string): asserts value is number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(
      `${name}.${field} must be a number of milliseconds; got ${typeof value === 'number' ? 'NaN' : kindOf(value)}`,
    );
  }
}

/**
 * Throws unless `options` is a {@link CacheSetOptions} object: `ttl` a number of milliseconds (not
 * `NaN`; `0` or less is an expired entry, `Infinity` no expiry) or `undefined`, `direct` and
 * `afterInvalidations` booleans or `undefined`, `renews` a {@link CacheEntry} or `undefined`. Names
 * it does not know are left alone: a newer core may pass fields this adapter was written before.
 *
 * @param name - how the argument is named in the message
 * @throws TypeError naming the argument or its field (`options must be an object; got undefined`,
 * `options.ttl must be a number of milliseconds or undefined; got string`)
 */
export function checkCacheSetOptions(options: unknown, name = 'options'): asserts options is CacheSetOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`${name} must be an object; got ${kindOf(options)}`);
  }
  const { ttl, direct, renews, afterInvalidations } = options as Partial<
    Record<keyof CacheSetOptions, unknown>
  >;
  if (ttl !== undefined && (typeof ttl !== 'number' || Number.isNaN(ttl))) {
    throw new TypeError(
      `${name}.ttl must be a number of milliseconds or undefined; got ${typeof ttl === 'number' ? 'NaN' : kindOf(ttl)}`,
    );
  }
  checkOptionalBoolean(direct, `${name}.direct`);
  checkOptionalBoolean(afterInvalidations, `${name}.afterInvalidations`);
  if (renews !== undefined) checkCacheEntry(renews, `${name}.renews`);
}

/**
 * {@link checkCacheEntry} then {@link checkCacheSetOptions}: the arguments of `set` after its key, and
 * of a lock's `commit`.
 *
 * @throws TypeError (RangeError for a negative `entry.delta`) naming the argument or its field
 */
export function checkCacheWrite(entry: unknown, options: unknown): void {
  checkCacheEntry(entry);
  checkCacheSetOptions(options);
}

function checkOptionalBoolean(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new TypeError(`${name} must be a boolean or undefined; got ${kindOf(value)}`);
  }
}

/**
 * Throws unless `tags` is an array of non-empty strings (an empty array is fine): what
 * `invalidateTags` takes. A string is refused, not read as a list of its characters.
 *
 * @param name - how the argument is named in the message
 * @throws TypeError `tags must be an array of non-empty strings; got string` (or `it holds number`)
 */
export function checkTagList(tags: unknown, name = 'tags'): asserts tags is readonly string[] {
  // `toTags` reads `undefined` as "no tags": an option may be left out, an argument may not.
  if (tags === undefined) throw new TypeError(`${name} must be an array of non-empty strings; got undefined`);
  toTags(tags, name);
}

/**
 * Throws unless `ttl` is a lock's time to live the core could have asked for: a finite number of
 * milliseconds, at least 1 (as `lockTtl` is). What `tryAcquireFillLock(AndRead)` and a lock's
 * `extend` take.
 *
 * @param name - how the argument is named in the message
 * @throws TypeError when `ttl` is not a number, RangeError when it is `NaN`, below 1 or `Infinity`
 */
export function checkLockTtl(ttl: unknown, name = 'ttl'): asserts ttl is number {
  if (typeof ttl !== 'number') {
    throw new TypeError(`${name} must be a finite number of milliseconds (at least 1); got ${kindOf(ttl)}`);
  }
  toPositiveMilliseconds(ttl, name);
}

/**
 * Throws unless the arguments of `onFillDone(key, listener, ready?)` are a non-empty key, a
 * function and `undefined` or a function: a listener that is not a function would only fail when
 * a fill ends, far from the call.
 *
 * @throws TypeError naming `key`, `listener` or `ready`
 */
export function checkFillDoneArguments(key: unknown, listener: unknown, ready?: unknown): void {
  checkCacheKey(key);
  if (typeof listener !== 'function') {
    throw new TypeError(`listener must be a function; got ${kindOf(listener)}`);
  }
  if (ready !== undefined && typeof ready !== 'function') {
    throw new TypeError(`ready must be a function or undefined; got ${kindOf(ready)}`);
  }
}

/**
 * Throws unless `message` is a string: what a {@link CacheBus}'s `publish` takes (a bus over a
 * line- or text-based channel would otherwise send `[object Object]`, or fail naming nothing).
 *
 * @throws TypeError `message must be a string; got number`
 */
export function checkBusMessage(message: unknown): asserts message is string {
  if (typeof message !== 'string') throw new TypeError(`message must be a string; got ${kindOf(message)}`);
}

/**
 * Throws unless `handlers` is a {@link CacheBusHandlers}: an object whose `message` is a function,
 * and whose `subscribed` and `lost` are functions or `undefined`. What a {@link CacheBus}'s
 * `subscribe` takes: a handler that is not a function would only fail when a message arrives.
 *
 * @throws TypeError naming `handlers` or the handler (`handlers.message must be a function; got undefined`)
 */
export function checkBusHandlers(handlers: unknown): asserts handlers is CacheBusHandlers {
  if (typeof handlers !== 'object' || handlers === null || Array.isArray(handlers)) {
    throw new TypeError(`handlers must be an object of functions; got ${kindOf(handlers)}`);
  }
  const { message, subscribed, lost } = handlers as Partial<Record<keyof CacheBusHandlers, unknown>>;
  if (typeof message !== 'function') {
    throw new TypeError(`handlers.message must be a function; got ${kindOf(message)}`);
  }
  for (const [name, handler] of [
    ['subscribed', subscribed],
    ['lost', lost],
  ] as const) {
    if (handler !== undefined && typeof handler !== 'function') {
      throw new TypeError(`handlers.${name} must be a function or undefined; got ${kindOf(handler)}`);
    }
  }
}
