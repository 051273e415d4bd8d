/**
 * What a binding hands the protocol: its Redis client reduced to the few commands stampede sends.
 * A binding adapts its own client (ioredis over TCP, `@upstash/redis` over HTTP, ...) to this shape;
 * everything else (keys, scripts, the lock, time-outs, errors) is the protocol's.
 */
export interface RedisProtocolClient {
  /** `GET key`: the stored value, or `null` (or `undefined`) when there is none. */
  get(key: string): Promise<unknown>;
  /**
   * `SET key value NX PX px`: resolves `'OK'` when the key was set, anything else (`null`) when it
   * already exists. `px` is whole milliseconds as digits.
   */
  setIfAbsent(key: string, value: string, px: string): Promise<unknown>;
  /**
   * `EVALSHA sha numkeys ...keys ...args`. When the server does not have the script cached it must
   * reject with an error whose message contains `NOSCRIPT` (Redis's own reply does), so the runner
   * falls back to {@link RedisProtocolClient.eval}.
   */
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  /** `EVAL script numkeys ...keys ...args`. */
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  /**
   * The SHA-1 of `text` as lower-case hex, for EVALSHA; `undefined` (or a rejection) makes the
   * runner send plain EVAL. A synchronous answer (Node's `crypto`) lets the first EVALSHA leave in
   * the same tick as the call that needs it.
   * @default the Web Crypto API's SHA-1 (`globalThis.crypto.subtle`), or plain EVAL without it
   */
  sha1?(text: string): string | Promise<string | undefined> | undefined;
  /**
   * True for a Redis Cluster client: one script may only touch keys of one hash slot. A tagged read
   * then takes two round trips (the entry, then its tags' keys), unless the prefix carries its own
   * hash tag (`app{1}:`), which puts every key of the cache in one slot.
   * @default false
   */
  readonly cluster?: boolean | undefined;
  /**
   * `SCRIPT LOAD script` (on every primary, for a cluster), so the first EVALSHA after a deploy or
   * a server restart does not pay a NOSCRIPT refusal and a second round trip with EVAL.
   * @default undefined (scripts are loaded by the first EVAL that needs them)
   */
  scriptLoad?(script: string): Promise<unknown>;
  /**
   * `CONFIG GET pattern` as name/value pairs (a record, or Redis's flat `[name, value, ...]` list),
   * to check the eviction policy. Managed Redis often refuses CONFIG: a rejection is tolerated.
   * @default undefined (the policy is not checked)
   */
  configGet?(pattern: string): Promise<unknown>;
  /**
   * Whether the connection is up now, so that a command goes to the server rather than into the
   * client's offline queue. A read sent or answered while it is down was late because of the
   * outage, not because of its value's size: it does not count towards the slow-read warning.
   * @default undefined (the connection is taken as up)
   */
  connected?(): boolean;
}
