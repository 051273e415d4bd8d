import { messageOf, reportWarning } from '@stampede/core/adapter';
import { redactServerEcho } from './errors.js';

/**
 * A command some scripts need besides those every script needs: `TIME` (the clock; deletes and tag
 * invalidations fall back to an estimate), `PEXPIRE` (a lock's extension), `PTTL` (a tombstone kept
 * as long as the key's lock). A refusal of one costs only what uses it.
 */
export type AuxiliaryCommand = 'TIME' | 'PEXPIRE' | 'PTTL';

/**
 * What the Redis user may do, as learnt from the server's refusals. Starts with everything allowed;
 * a refusal turns a capability off for the life of the cache (with one warning each), so a user
 * whose ACL lacks scripting costs one refused call, not a wait per herd.
 */
export interface ServerAccess {
  /**
   * False once Redis refused a script (EVAL/EVALSHA, or a command inside one). Writes and lock
   * releases are scripts: without them nothing is stored and a lock could never be released, so
   * the cache stops offering its fill lock (in-process protection only) rather than make every
   * herd wait out `lockWaitTimeout`.
   */
  readonly scripts: boolean;
  /**
   * False once Redis refused the PUBLISH of a fill's end: releases stop announcing (waiters poll
   * on `lockPollInterval`), so each release is not refused again.
   */
  readonly publish: boolean;
  /**
   * Looks at a script's failure: a permission refusal, or a server that does not know EVAL/EVALSHA,
   * turns `scripts` off (warning once).
   */
  scriptFailed(error: unknown): void;
  /** Turns `publish` off after a refused announcement (warning once). */
  publishRefused(error: unknown): void;
  /**
   * Looks at a refusal of one command a script needs of its own (`LuaScript.auxiliary`, or `PTTL`,
   * which the delete and the lock's extension call with `pcall` and report in their reply): a
   * permission refusal gets one warning per command (what is lost without it); scripting stays on.
   */
  auxiliaryFailed(command: AuxiliaryCommand, error: unknown): void;
}

/**
 * True for Redis's refusal of a command or a key/channel by ACL: `NOPERM ...` for a command sent
 * directly, `ERR The user executing the script can't ...` (Redis 7.0) or a NOPERM (later versions)
 * for a command inside a script.
 */
export function isPermissionError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  return /\bNOPERM\b|user executing the script can't/i.test(message);
}

/**
 * True for a server that does not know the scripting commands: EVAL/EVALSHA renamed or disabled
 * with `rename-command` (a hardened or managed Redis). Redis 7 quotes the name with `'`, Redis 6 with
 * a backquote.
 */
export function isScriptingUnavailable(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  return /unknown command [`'](?:eval|evalsha)(?:_ro)?[`']/i.test(message);
}

/**
 * True when `error`, a script's failure, is Redis refusing `command` alone, from inside the script:
 * a NOPERM that names it (`... to run the 'time' command`, Redis 7.2 on), or Redis 7.0's refusal of
 * a command inside a script, which names none (`The user executing the script can't run this
 * command`). A refusal of the script itself (`... to run the 'evalsha' command`), of another command
 * it names, or of a key, is not: that is a refusal of scripts.
 */
export function isAuxiliaryRefusal(error: unknown, command: string): boolean {
  if (!isPermissionError(error)) return false;
  const message = error instanceof Error ? error.message : String(error);
  const named = /\brun the '([^']+)' command/i.exec(message)?.[1];
  if (named !== undefined) return named.toLowerCase() === command.toLowerCase();
  return /user executing the script can't run this command/i.test(message);
}

const ACL_HINT =
  "grant the commands listed in @stampede/redis's README, section 'Running Redis for stampede'";

/**
 * Warns (once per `kind` for the cache named `name`) of a permission refusal: `warn(kind, error,
 * message)` reports `message(error text)` the first time `error` is such a refusal for `kind`.
 */
function refusalWarnings<K extends string>(
  name: string,
): (kind: K, error: unknown, message: (refusal: string) => string) => void {
  const warned = new Set<K>();
  return (kind, error, message) => {
    if (warned.has(kind) || !isPermissionError(error)) return;
    warned.add(kind);
    reportWarning(name, message(messageOf(error)));
  };
}

/** The {@link ServerAccess} of the cache named `name`. */
export function createServerAccess(name: string): ServerAccess {
  let scripts = true;
  let publish = true;
  const warnAuxiliary = refusalWarnings<AuxiliaryCommand>(name);
  return {
    get scripts() {
      return scripts;
    },
    get publish() {
      return publish;
    },
    scriptFailed(error) {
      if (!scripts) return;
      const unavailable = isScriptingUnavailable(error);
      if (!unavailable && !isPermissionError(error)) return;
      scripts = false;
      const fix = unavailable
        ? 'enable EVAL and EVALSHA on this server (they are renamed or disabled by rename-command), or use one that has them'
        : ACL_HINT;
      reportWarning(
        name,
        `stampede: Redis refused a script of cache '${name}' (${messageOf(redactServerEcho(error))}). Values are written and ` +
          'fill locks released by Lua scripts (EVAL/EVALSHA): nothing is stored, and the cache no longer takes ' +
          `the fill lock, so protection is in-process only (one fill per process, not per fleet); ${fix}.`,
      );
    },
    auxiliaryFailed(command, error) {
      warnAuxiliary(command, error, (refusal) =>
        command === 'TIME'
          ? `stampede: Redis refused TIME to cache '${name}' (${refusal}). The times the cache stores ` +
            "(an entry's createdAt and freshness, a delete's tombstone, a tag's invalidation) are then this " +
            "replica's own clock: replicas whose clocks disagree may order a fill and a delete wrongly, or keep " +
            `a value fresh longer. Allow TIME (+time; it is in no category but @fast); ${ACL_HINT}.`
          : command === 'PEXPIRE'
            ? `stampede: Redis refused to extend a fill lock of cache '${name}' (${refusal}). A fill ` +
              'that outlasts lockTtl then loses its lock, and another replica may fill the key at the same ' +
              `time. Allow PEXPIRE (+pexpire); ${ACL_HINT}.`
            : `stampede: Redis refused PTTL to cache '${name}' (${refusal}). A delete made while a fill ` +
              "holds the key's lock then keeps its tombstone only tombstoneTtl, not as long as the lock, and " +
              "the lock's extensions no longer extend it: a locked fill that started before the delete and " +
              `ends after its tombstone writes its older value back, undoing the delete. Allow PTTL (+pttl); ${ACL_HINT}.`,
      );
    },
    publishRefused(error) {
      if (!publish) return;
      publish = false;
      reportWarning(
        name,
        `stampede: Redis refused to PUBLISH the end of a fill of cache '${name}' (${messageOf(error)}). The lock ` +
          "is still released, but waiting replicas are not woken: they poll (lockPollInterval). Allow PUBLISH on the prefix's channels; " +
          `${ACL_HINT}.`,
      );
    },
  };
}

/** Notices Redis refusing the cache's pub/sub by ACL: SUBSCRIBE, or PUBLISH on the invalidation bus. */
export interface ChannelRefusalWatch {
  /** `operation` failed with `error` (a warning, once per kind, when it is a permission refusal). */
  failed(operation: 'subscribe' | 'publish', error: unknown): void;
}

/**
 * The watch of the cache named `name`. A user without access to the prefix's channels (Redis 7
 * gives a new user none: `acl-pubsub-default resetchannels`) loses push wake-up and, worse, a tiered
 * cache's coherence: each refusal was only a `backend-error` event. Now one warning per kind.
 */
export function createChannelRefusalWatch(name: string): ChannelRefusalWatch {
  const warn = refusalWarnings<'subscribe' | 'publish'>(name);
  return {
    failed(operation, error) {
      warn(operation, error, (refusal) =>
        operation === 'subscribe'
          ? `stampede: Redis refused to SUBSCRIBE for cache '${name}' (${refusal}). Lock waiters are ` +
            'not woken when a fill ends (they poll, lockPollInterval), and a tiered cache does not hear ' +
            "other replicas' writes and deletes: its local copies serve old values until localTtl. Allow " +
            `SUBSCRIBE and PUBLISH on the prefix's channels (&<prefix>*); ${ACL_HINT}.`
          : `stampede: Redis refused to PUBLISH on the invalidation bus of cache '${name}' (${refusal}). ` +
            "Other replicas' tiered caches do not hear this replica's writes and deletes: their local copies " +
            "serve old values until localTtl. Allow PUBLISH and SUBSCRIBE on the prefix's channels " +
            `(&<prefix>*); ${ACL_HINT}.`,
      );
    },
  };
}
