import { createHash } from 'node:crypto';
import type { RedisProtocolClient } from '@stampede/redis-protocol';
import type { Cluster, Redis } from 'ioredis';

/** A client `createRedisCache` accepts: a standalone `Redis` or a `Cluster`. */
export type RedisClient = Redis | Cluster;

/**
 * The client's `keyPrefix` option (`''` without one). ioredis puts it in front of every key it
 * sends (a command's keys, a script's KEYS), but not in front of channels, nor of the keys a script
 * builds from its arguments (a tagged entry's tag keys): the cache therefore works with the whole
 * name (`keyPrefix + prefix`) and hands ioredis its keys without the `keyPrefix` (see
 * {@link protocolClient}).
 */
export function keyPrefixOf(client: RedisClient): string {
  const options = (client as { options?: { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } } })
    .options;
  const keyPrefix = options?.keyPrefix ?? options?.redisOptions?.keyPrefix;
  return typeof keyPrefix === 'string' ? keyPrefix : '';
}

/**
 * `client` as the protocol's client: ioredis takes `numkeys` and spreads keys and arguments. The
 * protocol's keys carry the client's `keyPrefix` (see {@link keyPrefixOf}), which ioredis adds
 * itself: it is taken off each key here.
 */
export function protocolClient(client: RedisClient): RedisProtocolClient {
  const keyPrefix = keyPrefixOf(client);
  // Without a keyPrefix (the common case) keys pass as they are: no copy on a read's script call.
  const own = (key: string): string =>
    keyPrefix !== '' && key.startsWith(keyPrefix) ? key.slice(keyPrefix.length) : key;
  const ownKeys = (keys: readonly string[]): readonly string[] => (keyPrefix === '' ? keys : keys.map(own));
  return {
    get: (key) => client.get(own(key)),
    setIfAbsent: (key, value, px) => client.set(own(key), value, 'PX', px, 'NX'),
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...ownKeys(keys), ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...ownKeys(keys), ...args),
    // Synchronous, so the first EVALSHA of a script leaves in the same tick as its caller.
    sha1: (text) => createHash('sha1').update(text).digest('hex'),
    cluster: (client as { isCluster?: boolean }).isCluster === true,
    scriptLoad: (text) => {
      if (!isCluster(client)) return client.script('LOAD', text);
      // EVALSHA goes to the node of its key: every primary needs the script. Before the cluster
      // knows its nodes there is nowhere to load it; the first EVAL on each node does it then.
      return Promise.all(client.nodes('master').map((node) => node.script('LOAD', text)));
    },
    configGet: (pattern) => client.config('GET', pattern),
    connected: () => client.status === 'ready',
  };
}

/** Whether `client` is an ioredis `Cluster` (it follows MOVED and ASK redirections itself). */
export function isCluster(client: RedisClient): client is Cluster {
  return typeof (client as Partial<Cluster>).nodes === 'function';
}
