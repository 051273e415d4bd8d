import type { RedisProtocolClient } from './client.js';
import {
  COMMIT_LUA,
  DELETE_LUA,
  EXTEND_LOCK_LUA,
  INVALIDATE_TAGS_LUA,
  LOCK_AND_READ_LUA,
  NO_WRITES,
  RELEASE_LOCK_LUA,
  SERVER_TIME_LUA,
  TAGGED_GET_LUA,
  WRITE_GUARD_LUA,
} from './layout.js';
import { webSha1 } from './web-crypto.js';

/** A Lua script the protocol runs (by EVALSHA, falling back to EVAL). */
export interface LuaScript {
  /** The script's source, exactly as sent with EVAL (its SHA-1 is what EVALSHA names). */
  readonly source: string;
  /**
   * The index in ARGV (from 0) of an announcement that a PUBLISH inside the script sends when it is
   * not `''`. A failure of such a call is left to its caller (the refusal may be the PUBLISH alone,
   * after the script's writes: the caller tells it apart by running it again without announcing),
   * not taken as a refusal of scripts.
   */
  readonly announcement?: number | undefined;
  /**
   * The command, besides `GET`, that the script alone needs: `TIME` (the clock's script) or
   * `PEXPIRE` (a lock's extension). A permission refusal of such a script may be of that command
   * alone (`TIME` is in no ACL category but @fast; a hand-written command list may miss `PEXPIRE`),
   * which says nothing of the scripts that store and lock: it gets its own warning and is not taken
   * as a refusal of scripts.
   */
  readonly auxiliary?: 'TIME' | 'PEXPIRE' | undefined;
}

/** Refuses a write older than the stored entry or tombstone ({@link WRITE_GUARD_LUA}). */
export const WRITE_SCRIPT: LuaScript = { source: WRITE_GUARD_LUA };

/** Replaces an entry with a tombstone holding Redis's own time ({@link DELETE_LUA}). */
export const DELETE_SCRIPT: LuaScript = { source: DELETE_LUA };

/** `GET` that reads a tag-invalidated entry as nil ({@link TAGGED_GET_LUA}), flagged `no-writes`. */
export const GET_SCRIPT: LuaScript = { source: `${NO_WRITES}${TAGGED_GET_LUA}` };

/** {@link GET_SCRIPT} for a server older than Redis 7, which knows no script flags. */
export const GET_SCRIPT_WITHOUT_FLAGS: LuaScript = { source: TAGGED_GET_LUA };

/** Records Redis's time as the tags' invalidation time ({@link INVALIDATE_TAGS_LUA}). */
export const INVALIDATE_TAGS_SCRIPT: LuaScript = { source: INVALIDATE_TAGS_LUA };

/** Redis's time in ms, to measure this process's clock offset ({@link SERVER_TIME_LUA}). */
export const TIME_SCRIPT: LuaScript = { source: SERVER_TIME_LUA, auxiliary: 'TIME' };

/** Releases an owned lock and announces the outcome in the same script ({@link RELEASE_LOCK_LUA}). */
export const RELEASE_SCRIPT: LuaScript = { source: RELEASE_LOCK_LUA, announcement: 1 };

/** Tries the lock and reads the entry in one script ({@link LOCK_AND_READ_LUA}). */
export const LOCK_AND_READ_SCRIPT: LuaScript = { source: LOCK_AND_READ_LUA };

/** A holder's write, release and announcement in one script ({@link COMMIT_LUA}). */
export const COMMIT_SCRIPT: LuaScript = { source: COMMIT_LUA, announcement: 5 };

/** Extends the lock only for its owner ({@link EXTEND_LOCK_LUA}). */
export const EXTEND_SCRIPT: LuaScript = { source: EXTEND_LOCK_LUA, auxiliary: 'PEXPIRE' };

/** Runs one script: resolves with its reply. */
export type ScriptRunner = (script: LuaScript, keys: string[], args: string[]) => Promise<unknown>;

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.toUpperCase().includes('NOSCRIPT');
}

/**
 * A runner of scripts on `client`: EVALSHA, falling back to EVAL when the server does not have the
 * script cached (a restart, a `SCRIPT FLUSH`, another cluster node or region than last time), and
 * plain EVAL where no SHA-1 can be computed. A script's SHA-1 is kept once known; until then each
 * call computes its own rather than awaiting another call's (on workerd a request must not await a
 * promise that another request's work settles), which costs a digest of a few hundred bytes.
 */
export function createScriptRunner(client: RedisProtocolClient): ScriptRunner {
  // A script's SHA-1 once known, or null when it cannot be computed (plain EVAL then).
  const shas = new Map<string, string | null>();
  const hash = (source: string): string | null | Promise<string | null> => {
    if (client.sha1 === undefined) return webShaOf(source);
    try {
      const sha = client.sha1(source);
      if (sha === undefined || typeof sha === 'string') return sha ?? null;
      return sha.then(
        (known) => known ?? null,
        () => null,
      );
    } catch {
      return null;
    }
  };
  return async (script, keys, args) => {
    let sha = shas.get(script.source);
    if (sha === undefined) {
      const computed = hash(script.source);
      // A synchronous SHA-1 sends EVALSHA in the caller's tick, as the commands around it are.
      sha = typeof computed === 'object' && computed !== null ? await computed : computed;
      shas.set(script.source, sha);
    }
    if (sha === null) return client.eval(script.source, keys, args);
    try {
      return await client.evalsha(sha, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return client.eval(script.source, keys, args);
    }
  };
}

// The Web Crypto digests known in this process, shared by every runner: a cache created later (one
// per request on an edge runtime) does not compute a digest before its first call, which would
// widen the round trip its server clock is first measured with. Only finished digests are shared.
const webShas = new Map<string, string | null>();

function webShaOf(source: string): string | null | Promise<string | null> {
  const known = webShas.get(source);
  if (known !== undefined) return known;
  return webSha1(source).then(
    (sha) => {
      const found = sha ?? null;
      webShas.set(source, found);
      return found;
    },
    () => null,
  );
}
