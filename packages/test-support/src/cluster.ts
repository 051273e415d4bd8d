import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { type RedisProcess, redisCliBinary, spawnRedisServer } from './processes.js';

/** A Redis Cluster this harness started: masters only, on free ports of 127.0.0.1. */
export interface RedisClusterServer {
  /** The masters, as ioredis `Cluster` startup nodes. */
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  /** Stops every node and removes their directories. */
  stop(): Promise<void>;
}

const run = promisify(execFile);

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

async function clusterReady(port: number, masters: number): Promise<boolean> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await client.connect();
    const info = await client.cluster('INFO');
    const nodes = String(await client.cluster('NODES'))
      .split('\n')
      .filter((line) => line.includes('master') && line.includes('connected'));
    return (
      info.includes('cluster_state:ok') && info.includes('cluster_slots_ok:16384') && nodes.length === masters
    );
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * Starts `masters` redis-server processes in cluster mode (`--cluster-enabled yes`, each with its own
 * config file and an explicit `--cluster-port`, since port + 10000 may not be free), joins them with
 * `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, and waits until every node
 * reports `cluster_state:ok` with all 16384 slots. Fails clearly (and stops what it started) otherwise.
 */
export async function startRedisCluster(masters = 3): Promise<RedisClusterServer> {
  const ports = await distinctFreePorts(masters * 2);
  const started: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(started.map((server) => server.stop()));
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = ports[i] as number;
      const busPort = ports[masters + i] as number;
      started.push(
        await spawnRedisServer(port, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-port',
          String(busPort),
          '--cluster-node-timeout',
          '3000',
        ]),
      );
    }
    await run(
      redisCliBinary(),
      [
        '--cluster',
        'create',
        ...started.map((server) => `127.0.0.1:${server.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await Promise.all(started.map((server) => clusterReady(server.port, masters)));
      if (ready.every(Boolean)) break;
      if (Date.now() > deadline)
        throw new Error('the Redis Cluster did not reach cluster_state:ok within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes: started.map((server) => ({ host: '127.0.0.1', port: server.port })), stop };
}
