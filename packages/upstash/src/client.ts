import { kindOf } from '@stampede/core/adapter';
import type { RedisProtocolClient } from '@stampede/redis-protocol';
import type { Redis } from '@upstash/redis';

/**
 * The part of an `@upstash/redis` `Redis` client the cache uses. Any of the package's builds fits
 * (`@upstash/redis`, `@upstash/redis/cloudflare`, `@upstash/redis/fastly`), with
 * `automaticDeserialization` on or off.
 */
export type UpstashClient = Pick<Redis, 'get' | 'set' | 'eval' | 'evalsha'>;

function isFunction(value: unknown): boolean {
  return typeof value === 'function';
}

/**
 * Throws a `TypeError` naming the option (`options.client` unless told) unless `client` looks like
 * an `@upstash/redis` client.
 */
export function assertUpstashClient(
  client: unknown,
  option = 'options.client',
): asserts client is UpstashClient {
  if (client === undefined) throw new TypeError(`${option} is required: pass a Redis from @upstash/redis`);
  if (client === null) throw new TypeError(`${option} must be a Redis from @upstash/redis; got null`);
  if (typeof client !== 'object') {
    throw new TypeError(`${option} must be a Redis from @upstash/redis; got ${kindOf(client)}`);
  }
  const candidate = client as Record<string, unknown>;
  if (isFunction(candidate.duplicate) || isFunction(candidate.sendCommand)) {
    throw new TypeError(
      `${option} looks like a TCP Redis client (ioredis, node-redis): pass a Redis from @upstash/redis, or use @stampede/redis`,
    );
  }
  const missing = ['get', 'set', 'eval', 'evalsha'].filter((method) => !isFunction(candidate[method]));
  if (missing.length > 0) {
    throw new TypeError(
      `${option} must be a Redis from @upstash/redis; it has no ${missing.join(', ')} method`,
    );
  }
}

/**
 * `client` as the protocol's client. The lock's `PX` goes as a number (the client's option type);
 * the SHA-1 for EVALSHA is the protocol's default, the Web Crypto API, so nothing here needs Node.
 */
export function protocolClient(client: UpstashClient): RedisProtocolClient {
  return {
    get: (key) => client.get<unknown>(key),
    setIfAbsent: (key, value, px) => client.set(key, value, { nx: true, px: Number(px) }),
    evalsha: (sha, keys, args) => client.evalsha(sha, keys, args),
    eval: (script, keys, args) => client.eval(script, keys, args),
  };
}
