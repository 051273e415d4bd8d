import type { RedisProtocolClient } from './client.js';
import type { OperationRunner } from './operation.js';
import { createScriptRunner, type ScriptRunner } from './scripts.js';

/** What the parts of one Redis-protocol cache share. */
export interface RedisProtocolContext {
  /** The binding's client, adapted. */
  readonly client: RedisProtocolClient;
  /** The key prefix. */
  readonly prefix: string;
  /** Bounded calls and fault reports. */
  readonly operations: OperationRunner;
  /** Runs a Lua script (EVALSHA, then EVAL). Not bounded: wrap it in `operations.call`. */
  readonly runScript: ScriptRunner;
}

/** The context of a cache on `client` under `prefix`. */
export function createRedisProtocolContext(
  client: RedisProtocolClient,
  prefix: string,
  operations: OperationRunner,
): RedisProtocolContext {
  return { client, prefix, operations, runScript: createScriptRunner(client) };
}
