import { messageOf, reportWarning } from '@stampede/core/adapter';
import { isPermissionError } from './access.js';
import { createKeyStreaks } from './key-streaks.js';

/** Writes of one key refused in a row after which the warning is given. */
export const REFUSED_WRITE_STREAK = 3;

// Replies a client or this package handles on its own, or that pass within seconds (a Cluster
// resharding, a server loading its data or busy with a script, a replica without its primary).
const PASSING = new Set([
  'NOSCRIPT',
  'MOVED',
  'ASK',
  'TRYAGAIN',
  'CLUSTERDOWN',
  'LOADING',
  'BUSY',
  'MASTERDOWN',
]);

/**
 * True for the server's refusal of a write: an error reply (`OOM ...`, `MISCONF ...`, `READONLY ...`,
 * Upstash's `ERR max request size exceeded`), not a time-out or a lost connection. Replies that pass
 * on their own (`LOADING`, `MOVED`, ...) and ACL refusals (warned of apart, see `ServerAccess`) are not.
 */
export function isServerRefusal(error: unknown): boolean {
  const code = /^([A-Z][A-Z_]+)\s/.exec(messageOf(error))?.[1];
  return code !== undefined && !PASSING.has(code) && !isPermissionError(error);
}

/** Watches the writes of one cache for keys that are never stored, call after call. */
export interface RefusedWriteWatch {
  /** A write of `key` failed with `error` (counted when it is a {@link isServerRefusal}). */
  refused(key: string, error: unknown): void;
  /** A value of `key` could not be serialised (`error`), so nothing was sent. */
  unserialisable(key: string, error: unknown): void;
  /** A write of `key` was answered (stored, or turned down by the never-older guard). */
  written(key: string): void;
}

// The reply without what a client appends (@upstash/redis adds the whole command, value included).
function replyText(error: unknown): string {
  const message = messageOf(error);
  const end = message.indexOf(', command was:');
  const reply = end === -1 ? message : message.slice(0, end);
  return reply.length > 200 ? `${reply.slice(0, 200)}...` : reply;
}

/** What a binding's wrapping error (encode, decode) was made from: its `cause`, when it has one. */
function causeOf(error: unknown): unknown {
  return error instanceof Error && error.cause !== undefined ? error.cause : error;
}

const NEVER_STORED =
  'nothing is stored for this key, so every call for it runs the fill again, on every replica.';

/**
 * The watch of the cache named `name`. A write the server refuses, or a value the serializer
 * cannot carry, leaves the key uncached: every call for it misses and runs its fill (on every
 * replica), and each failure is only a `backend-error` event. After {@link REFUSED_WRITE_STREAK}
 * such writes in a row for one key, one warning (for the cache's life, one for refusals and one
 * for values) names the key and the reason.
 */
export function createRefusedWriteWatch(name: string): RefusedWriteWatch {
  const refusals = createKeyStreaks(REFUSED_WRITE_STREAK);
  const unserialisable = createKeyStreaks(REFUSED_WRITE_STREAK);
  let warnedRefused = false;
  let warnedUnserialisable = false;
  return {
    refused(key, error) {
      if (warnedRefused || !isServerRefusal(error) || !refusals.add(key)) return;
      warnedRefused = true;
      reportWarning(
        name,
        `stampede: the server refused ${REFUSED_WRITE_STREAK} writes in a row of '${key}' in cache '${name}' ` +
          `(${replyText(error)}): ${NEVER_STORED} Common causes: a full Redis under maxmemory-policy ` +
          'noeviction (OOM), failing snapshots under stop-writes-on-bgsave-error (MISCONF), a client ' +
          "connected to a read-only replica (READONLY), a value over the server's request size limit " +
          "(Upstash: 10 MB); see 'Running Redis for stampede' in @stampede/redis's README.",
      );
    },
    unserialisable(key, error) {
      if (warnedUnserialisable || !unserialisable.add(key)) return;
      warnedUnserialisable = true;
      reportWarning(
        name,
        `stampede: ${REFUSED_WRITE_STREAK} values in a row of '${key}' in cache '${name}' could not be ` +
          `serialised (${replyText(causeOf(error))}): ${NEVER_STORED} Return values the serializer carries ` +
          '(under JSON: no BigInt, no cycles), or pass a serializer that carries them (superjson, devalue).',
      );
    },
    written(key) {
      refusals.end(key);
      unserialisable.end(key);
    },
  };
}

/** Reads of one key that could not be decoded in a row after which the warning is given. */
export const UNDECODABLE_STREAK = 3;

/** Watches the reads of one cache for keys whose stored entry never decodes, call after call. */
export interface UndecodableWatch {
  /** The entry stored for `key` could not be decoded (`error`): read as a miss. */
  undecodable(key: string, error: unknown): void;
  /** An entry stored for `key` was decoded. */
  decoded(key: string): void;
}

/**
 * The decode watch of the cache named `name`. An undecodable entry reads as a miss and the fill
 * that follows writes over it, so a key whose entry fails to decode again and again has a writer
 * that keeps storing what this cache cannot read: a serializer whose `parse` does not undo its
 * `stringify`, replicas with different serializers on one prefix, or another program writing under
 * the prefix. Every call for it then runs its fill, each only a `backend-error` event. After
 * {@link UNDECODABLE_STREAK} such reads in a row for one key, one warning for the cache's life.
 */
export function createUndecodableWatch(name: string): UndecodableWatch {
  const streaks = createKeyStreaks(UNDECODABLE_STREAK);
  let warned = false;
  return {
    undecodable(key, error) {
      if (warned || !streaks.add(key)) return;
      warned = true;
      reportWarning(
        name,
        `stampede: the entry of '${key}' in cache '${name}' could not be decoded ${UNDECODABLE_STREAK} reads ` +
          `in a row (${replyText(causeOf(error))}): each read is a miss and runs the fill, whose write is then ` +
          'unreadable again. Common causes: a serializer whose parse does not undo its stringify, replicas ' +
          'with different serializers on one prefix, another program writing under the prefix.',
      );
    },
    decoded(key) {
      streaks.end(key);
    },
  };
}
