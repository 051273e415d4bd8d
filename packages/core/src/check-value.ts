import { isThenable } from './backend.js';
import type { CacheEntry } from './cache.js';
import { changeEntry } from './entry.js';
import { CacheFillError, kindOf, messageOf } from './errors.js';
import { emit, hasListeners } from './events.js';
import type { CacheState } from './registry.js';
import type { StandardSchemaV1 } from './standard-schema.js';

/**
 * What `checkValue` accepts: a Standard Schema (zod, valibot, arktype, ...), or a function that
 * answers `true` for a good value and `false` or a message for a bad one.
 */
export type CheckValue = StandardSchemaV1 | ((value: unknown) => boolean | string);

/** The issues a failed check reports (a Standard Schema's own, or one made from the function's answer). */
export type CheckIssues = ReadonlyArray<StandardSchemaV1.Issue>;

/** How a check ended: the value to hand out (a schema's output), or the issues. */
export type CheckResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly issues: CheckIssues };

/** A validated `checkValue`: runs it on a value, synchronously when it can. */
export type ValueCheck = (value: unknown) => CheckResult | Promise<CheckResult>;

function isSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as Partial<StandardSchemaV1>)['~standard'];
  return typeof props === 'object' && props !== null && typeof props.validate === 'function';
}

function failed(message: string): CheckResult {
  return { ok: false, issues: [{ message }] };
}

/**
 * A schema's result as a {@link CheckResult}. A result that is not one a Standard Schema may give
 * (`{ value }`, or `{ issues }` with an array of issues) fails the value with an issue that says
 * what came back: taken as a success it would hand callers `undefined`, and its issues, read as an
 * array, would throw where nobody answers the callers.
 */
function fromSchema(result: unknown): CheckResult {
  try {
    if (typeof result === 'object' && result !== null) {
      const { issues } = result as { issues?: unknown };
      // "A falsy value for `issues` indicates success" (the Standard Schema's own words): `null`
      // too, as a hand-written schema may answer.
      if (!issues) {
        if ('value' in result) return { ok: true, value: (result as { value: unknown }).value };
      } else if (Array.isArray(issues) && issues.length > 0) {
        return { ok: false, issues: issues.map(toIssue) };
      }
    }
    return failed(`checkValue's schema returned ${describeAnswer(result)}, not a Standard Schema result`);
  } catch (error) {
    return failed(messageOf(error));
  }
}

/** One issue of a schema's result, as the issues of a failed check hold it. */
function toIssue(issue: unknown): StandardSchemaV1.Issue {
  if (
    typeof issue === 'object' &&
    issue !== null &&
    typeof (issue as { message?: unknown }).message === 'string'
  ) {
    const { message, path } = issue as StandardSchemaV1.Issue;
    return Array.isArray(path) ? { message, path } : { message };
  }
  return {
    message: typeof issue === 'string' ? issue : `an issue that is not { message }: ${describeAnswer(issue)}`,
  };
}

function fromAnswer(answer: unknown, value: unknown): CheckResult {
  if (answer === true) return { ok: true, value };
  if (typeof answer === 'string') return failed(answer);
  // Anything but true or a string fails; the message says what came back (a function that forgot
  // to return gives `undefined`, which must not read as "returned false").
  return failed(
    answer === false
      ? 'checkValue returned false'
      : `checkValue returned ${describeAnswer(answer)}, not true, false or a reason string`,
  );
}

/**
 * `option` as a {@link ValueCheck}, or `undefined` when it is `undefined`. A validator that throws
 * (or rejects) fails the value with the error's message as its issue.
 *
 * @throws TypeError naming `name` when `option` is neither a Standard Schema nor a function
 */
export function toValueCheck(option: unknown, name: string): ValueCheck | undefined {
  if (option === undefined) return undefined;
  // One check per schema or function: callers that pass the same one share a fill's checked value.
  const known =
    (typeof option === 'object' || typeof option === 'function') && option !== null
      ? valueChecks.get(option)
      : undefined;
  if (known !== undefined) return known;
  const check = makeValueCheck(option, name);
  valueChecks.set(option as object, check);
  return check;
}

// The check made for each `checkValue` given (a schema or a function), by identity.
const valueChecks = new WeakMap<object, ValueCheck>();

function makeValueCheck(option: unknown, name: string): ValueCheck {
  if (isSchema(option)) {
    const schema = option['~standard'];
    return (value) => {
      let result: unknown;
      try {
        result = schema.validate(value);
      } catch (error) {
        return failed(messageOf(error));
      }
      return isThenable(result)
        ? Promise.resolve(result).then(fromSchema, (error: unknown) => failed(messageOf(error)))
        : fromSchema(result);
    };
  }
  if (typeof option === 'function') {
    const check = option as (value: unknown) => unknown;
    return (value) => {
      let answer: unknown;
      try {
        answer = check(value);
      } catch (error) {
        return failed(messageOf(error));
      }
      return isThenable(answer)
        ? Promise.resolve(answer).then(
            (settled) => fromAnswer(settled, value),
            (error: unknown) => failed(messageOf(error)),
          )
        : fromAnswer(answer, value);
    };
  }
  throw new TypeError(
    `${name} must be a Standard Schema (zod, valibot, arktype, ...) or a function; got ${kindOf(option)}`,
  );
}

/** The issues as one line, for an error message. */
export function describeIssues(issues: CheckIssues): string {
  return issues
    .slice(0, 3)
    .map((issue) => {
      const path = issue.path
        ?.map((segment) => String(typeof segment === 'object' && segment !== null ? segment.key : segment))
        .join('.');
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join('; ');
}

/**
 * The issues as a fill failure's `cause`: the same array (a copy), whose `String()` reads as a
 * message, so `CacheFillError.message` says what failed instead of `[object Object]`.
 */
function asCause(issues: CheckIssues): CheckIssues {
  const cause = [...issues];
  const message = `checkValue rejected the value: ${describeIssues(issues)}`;
  Object.defineProperty(cause, 'toString', { value: () => message, enumerable: false });
  return Object.freeze(cause);
}

/** Emits a `check-value` event when someone listens. */
export function checkEvent(
  state: CacheState,
  key: string,
  source: 'cache' | 'fill',
  issues: CheckIssues,
): void {
  if (hasListeners()) emit({ type: 'check-value', cache: state.name, key, source, issues });
}

/** A failed check's issues ready to be a fill error's `cause` (see {@link asCause}). */
export function fillCheckFailure(issues: CheckIssues): CheckIssues {
  return asCause(issues);
}

/**
 * What a caller gets from a fill it joined whose starting call had another `checkValue` (or none):
 * its own `check` run on `stored`, the fill's value as the cache holds it, so that it gets what a
 * hit of that value would give it (a schema's output, never the other check's). A value its check
 * refuses (counted as `checkValueFailures`, with a `check-value` event of source `'fill'`) rejects
 * as a failed fill would for a joiner: a `CacheFillError` of kind `'fill_failed'` whose `cause` is
 * the issues. Without a check of its own, the caller gets `stored`.
 */
export function checkJoined(
  state: CacheState,
  key: string,
  stored: unknown,
  check: ValueCheck | undefined,
): unknown {
  if (check === undefined) return stored;
  const settle = (result: CheckResult): unknown => {
    if (result.ok) return result.value;
    state.counters.checkValueFailures++;
    checkEvent(state, key, 'fill', result.issues);
    const cause = asCause(result.issues);
    throw new CacheFillError('fill_failed', key, String(cause), { cause });
  };
  const result = check(stored);
  return isThenable(result) ? result.then(settle) : settle(result);
}

/**
 * Checks a value read from the cache: `{ value }` (a schema's output) when it passes, `undefined`
 * (counted as `checkValueFailures`, with a `check-value` event) when it fails and must be a miss.
 */
export function checkCached(
  state: CacheState,
  key: string,
  value: unknown,
  check: ValueCheck,
): { readonly value: unknown } | undefined | Promise<{ readonly value: unknown } | undefined> {
  const settle = (result: CheckResult): { readonly value: unknown } | undefined => {
    if (result.ok) return result;
    state.counters.checkValueFailures++;
    checkEvent(state, key, 'cache', result.issues);
    return undefined;
  };
  const result = check(value);
  return isThenable(result) ? result.then(settle) : settle(result);
}

// The entry as the cache holds it, for each entry `checkedEntry` made with a schema's output as its
// value. Whatever writes an entry back (fail-safe's re-arm) must store the cache's value, the
// schema's input: the output may not pass the schema again (a transform), and then the re-armed
// entry would read as a miss.
const storedEntries = new WeakMap<CacheEntry, CacheEntry>();

/**
 * `entry` after `checkValue`: as it is (or with the schema's output as its value) when it passes,
 * `undefined` (a miss, counted) when it fails.
 */
export function checkedEntry(
  state: CacheState,
  key: string,
  entry: CacheEntry | undefined,
  check: ValueCheck,
): CacheEntry | undefined | Promise<CacheEntry | undefined> {
  if (entry === undefined) return undefined;
  const apply = (checked: { readonly value: unknown } | undefined): CacheEntry | undefined => {
    if (checked === undefined) return undefined;
    if (Object.is(checked.value, entry.value)) return entry;
    const output = changeEntry(entry, { value: checked.value });
    storedEntries.set(output, storedEntryOf(entry));
    return output;
  };
  const checked = checkCached(state, key, entry.value, check);
  return isThenable(checked) ? checked.then(apply) : apply(checked);
}

/** The entry as the cache holds it: `entry` itself, unless {@link checkedEntry} made it from that one. */
export function storedEntryOf(entry: CacheEntry): CacheEntry {
  return storedEntries.get(entry) ?? entry;
}

function describeAnswer(answer: unknown): string {
  if (answer === null || answer === undefined) return String(answer);
  if (typeof answer === 'number' || typeof answer === 'boolean') return `${typeof answer} ${String(answer)}`;
  return kindOf(answer);
}
