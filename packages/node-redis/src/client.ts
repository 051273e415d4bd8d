import { createHash } from 'node:crypto';
import type { RedisProtocolClient } from '@stampede/redis-protocol';

/** `keys` and `arguments` of node-redis's `eval` and `evalSha`. */
interface ScriptOptions {
  keys: string[];
  arguments: string[];
}

/**
 * The subscriber connection the cache opens with `client.duplicate()`: the few members of a
 * node-redis 6 client it uses.
 */
export interface NodeRedisSubscriber {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end' | 'ready' | 'reconnecting', listener: () => void): unknown;
}

/**
 * A client `createNodeRedisCache` accepts: a connected node-redis 6 client (`createClient()` of the
 * `redis` package), reduced to the members the cache uses, so clients with modules, scripts or RESP3
 * fit too.
 */
export interface NodeRedisClient {
  get(key: string): Promise<unknown>;
  set(
    key: string,
    value: string,
    options: { condition: 'NX'; expiration: { type: 'PX'; value: number } },
  ): Promise<unknown>;
  evalSha(sha: string, options: ScriptOptions): Promise<unknown>;
  eval(script: string, options: ScriptOptions): Promise<unknown>;
  /** For the invalidation bus. */
  publish(channel: string, message: string): Promise<unknown>;
  duplicate(): NodeRedisSubscriber;
  /** `SCRIPT LOAD`: used, when present, to load the scripts as the cache is created. */
  scriptLoad?(script: string): Promise<unknown>;
  /** `CONFIG GET`: used, when present, to read the eviction policy once. */
  configGet?(parameters: string): Promise<unknown>;
  /** False once the client is closed (or before `connect()`). */
  readonly isOpen: boolean;
  /**
   * True while the connection is up and ready (false while it reconnects): reads sent meanwhile
   * wait in node-redis's offline queue. Optional: without it the connection is taken as up.
   */
  readonly isReady?: boolean;
  on(event: 'end', listener: () => void): unknown;
  off(event: 'end', listener: () => void): unknown;
}

const utf8 = new TextDecoder();

/**
 * `reply` with every byte string in it as text. A client made `withTypeMapping` (strings as
 * `Buffer`, as binary-minded applications configure it) answers bytes where the protocol reads
 * text: every stored entry would fail to decode and every call would run its fill.
 */
export function asText(reply: unknown): unknown {
  if (typeof reply === 'string' || reply === null || typeof reply !== 'object') return reply;
  if (reply instanceof Uint8Array) return utf8.decode(reply);
  if (Array.isArray(reply)) return reply.some(isObject) ? reply.map(asText) : reply;
  if (reply instanceof Map) return new Map([...reply].map(([key, value]) => [asText(key), asText(value)]));
  if (Object.getPrototypeOf(reply) !== Object.prototype && Object.getPrototypeOf(reply) !== null)
    return reply;
  return Object.fromEntries(Object.entries(reply).map(([key, value]) => [key, asText(value)]));
}

const isObject = (value: unknown): boolean => value !== null && typeof value === 'object';

/** `client` as the protocol's client: node-redis takes keys and arguments as named lists. */
export function protocolClient(client: NodeRedisClient): RedisProtocolClient {
  return {
    get: async (key) => asText(await client.get(key)),
    setIfAbsent: async (key, value, px) =>
      asText(
        await client.set(key, value, { condition: 'NX', expiration: { type: 'PX', value: Number(px) } }),
      ),
    // A NOSCRIPT reply rejects with an ErrorReply whose message starts with 'NOSCRIPT'.
    evalsha: async (sha, keys, args) => asText(await client.evalSha(sha, { keys, arguments: args })),
    eval: async (script, keys, args) => asText(await client.eval(script, { keys, arguments: args })),
    // Synchronous, so the first EVALSHA of a script leaves in the same tick as its caller.
    sha1: (text) => createHash('sha1').update(text).digest('hex'),
    scriptLoad:
      client.scriptLoad === undefined ? undefined : async (text) => asText(await client.scriptLoad?.(text)),
    configGet:
      client.configGet === undefined
        ? undefined
        : async (pattern) => asText(await client.configGet?.(pattern)),
    connected: () => client.isReady !== false,
  };
}
