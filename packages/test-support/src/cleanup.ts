import type { Cluster, Redis } from 'ioredis';

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

async function scanDelete(node: Redis, pattern: string, remove: (keys: string[]) => Promise<unknown>) {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    if (keys.length !== 0) await remove(keys);
  } while (cursor !== '0');
}

/**
 * Deletes every key that starts with `prefix` (SCAN + DEL; on a cluster, on every master): tests
 * clean only their own prefix, never FLUSHALL.
 */
export async function deletePrefix(client: Redis | Cluster, prefix: string): Promise<void> {
  const pattern = `${escapeGlob(prefix)}*`;
  if (client.isCluster) {
    const cluster = client as Cluster;
    for (const node of cluster.nodes('master')) {
      // Keys from one SCAN page can live in different slots: delete them one by one.
      await scanDelete(node, pattern, (keys) => Promise.all(keys.map((key) => node.del(key))));
    }
  } else {
    const redis = client as Redis;
    await scanDelete(redis, pattern, (keys) => redis.del(...keys));
  }
}
