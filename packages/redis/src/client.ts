import { createHash } from 'node:crypto';
import type { RedisProtocolClient } from '@stampede/redis-protocol';
import type { Cluster, Redis } from 'ioredis';

/** A client `createRedisCache` accepts: a standalone `Redis` or a `Cluster`. */
export type RedisClient = Redis | Cluster;

/** `client` as the protocol's client: ioredis takes `numkeys` and spreads keys and arguments. */
export function protocolClient(client: RedisClient): RedisProtocolClient {
  return {
    get: (key) => client.get(key),
    setIfAbsent: (key, value, px) => client.set(key, value, 'PX', px, 'NX'),
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
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
  };
}

function isCluster(client: RedisClient): client is Cluster {
  return typeof (client as Partial<Cluster>).nodes === 'function';
}
