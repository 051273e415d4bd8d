import {
  checkKnownKeys,
  type Duration,
  kindOf,
  type Serializer,
  type SerializerOption,
  toPositiveMilliseconds,
  toSerializer,
} from '@stampede/core/adapter';
import { checkRemotePrefix } from './layout.js';

/** The options every Redis-protocol binding takes (each binding documents them with its defaults). */
export interface RedisProtocolOptions {
  /** Put before every key name the cache writes. @default 'stampede:' */
  prefix?: string | undefined;
  /** The cache's name in stats, events and metric labels. @default the binding's name */
  name?: string | undefined;
  /** Turns values into text and back (`{ stringify, parse }`). @default JSON */
  serializer?: SerializerOption | undefined;
  /** Longest wait for any one call. @default 1000 (ms) */
  operationTimeout?: Duration | undefined;
  /** How long a delete's tombstone is kept. @default 10000 (ms) */
  tombstoneTtl?: Duration | undefined;
}

/** {@link RedisProtocolOptions} checked, with the defaults applied. */
export interface ParsedRedisProtocolOptions {
  /** The key prefix. */
  readonly prefix: string;
  /** The cache's name. */
  readonly name: string;
  /** The serializer. */
  readonly serializer: Serializer;
  /** Longest wait for any one call, in ms. */
  readonly operationTimeout: number;
  /** How long a delete's tombstone is kept, in ms. */
  readonly tombstoneTtl: number;
}

/** The default key prefix of every binding. */
export const DEFAULT_PREFIX = 'stampede:';
/** The default `operationTimeout`, in ms. */
export const DEFAULT_OPERATION_TIMEOUT = 1_000;
/** The default `tombstoneTtl`, in ms. */
export const DEFAULT_TOMBSTONE_TTL = 10_000;

const SHARED_OPTIONS = ['prefix', 'name', 'serializer', 'operationTimeout', 'tombstoneTtl'] as const;

/**
 * Checks the shared options (naming the one at fault, as `options.<name>`) and applies the
 * defaults; `defaultName` is the binding's default cache name. The binding checks its client and
 * its own options first. `own` lists the binding's own option names (`client`, `lockClient`, ...):
 * any other name is a `TypeError`, so a misspelt option is not silently ignored.
 *
 * @throws TypeError for an option of the wrong type or an unknown option; RangeError for a duration
 * below 1 ms or a prefix that opens an empty hash tag
 */
export function parseRedisProtocolOptions(
  options: RedisProtocolOptions,
  defaultName: string,
  own: readonly string[] = [],
): ParsedRedisProtocolOptions {
  // Once per cache created: a Set made here costs nothing worth keeping one for.
  checkKnownKeys(options, new Set([...SHARED_OPTIONS, ...own]), 'options');
  const { prefix = DEFAULT_PREFIX, name = defaultName } = options;
  if (typeof prefix !== 'string')
    throw new TypeError(`options.prefix must be a string; got ${kindOf(prefix)}`);
  checkRemotePrefix(prefix);
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError('options.name must be a non-empty string');
  }
  const serializer = toSerializer(options.serializer, 'options.serializer');
  const operationTimeout =
    options.operationTimeout === undefined
      ? DEFAULT_OPERATION_TIMEOUT
      : toPositiveMilliseconds(options.operationTimeout, 'options.operationTimeout');
  const tombstoneTtl =
    options.tombstoneTtl === undefined
      ? DEFAULT_TOMBSTONE_TTL
      : toPositiveMilliseconds(options.tombstoneTtl, 'options.tombstoneTtl');
  return { prefix, name, serializer, operationTimeout, tombstoneTtl };
}
