import { messageOf, reportWarning } from '@stampede/core/adapter';

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
  /** Looks at a script's failure: a permission refusal turns `scripts` off (warning once). */
  scriptFailed(error: unknown): void;
  /** Turns `publish` off after a refused announcement (warning once). */
  publishRefused(error: unknown): void;
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

const ACL_HINT =
  "grant the commands listed in @stampede/redis's README, section 'Running Redis for stampede'";

/** The {@link ServerAccess} of the cache named `name`. */
export function createServerAccess(name: string): ServerAccess {
  let scripts = true;
  let publish = true;
  return {
    get scripts() {
      return scripts;
    },
    get publish() {
      return publish;
    },
    scriptFailed(error) {
      if (!scripts || !isPermissionError(error)) return;
      scripts = false;
      reportWarning(
        name,
        `stampede: Redis refused a script of cache '${name}' (${messageOf(error)}). Values are written and ` +
          'fill locks released by Lua scripts (EVAL/EVALSHA): nothing is stored, and the cache no longer takes ' +
          `the fill lock, so protection is in-process only (one fill per process, not per fleet); ${ACL_HINT}.`,
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
