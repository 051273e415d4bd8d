import { fileURLToPath } from 'node:url';
import { spawnWorker, type Worker } from '@stampede/test-support';
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

/** Deletes every key that starts with `prefix` (SCAN + DEL; on a cluster, on every master). */
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

/** Result line of one `herd` command of test/fixtures/replica.mjs. */
export interface HerdReport {
  id: string;
  pid: number;
  fills: number;
  answered: number;
  errors: string[];
  fillers: number[];
  maxMs: number;
  medianMs: number;
  backendErrors: string[];
}

/** Configuration of a replica process. */
export interface ReplicaConfig {
  url?: string;
  clusterNodes?: readonly { host: string; port: number }[];
  prefix: string;
  operationTimeout?: number;
}

const REPLICA = fileURLToPath(new URL('./fixtures/replica.mjs', import.meta.url));

/** Starts `count` replica processes and waits until each has its Redis connection ready. */
export async function startReplicas(count: number, config: ReplicaConfig): Promise<Worker[]> {
  const workers = Array.from({ length: count }, () => spawnWorker(REPLICA, [JSON.stringify(config)]));
  await Promise.all(
    workers.map((worker) => worker.next<{ id?: string; ready?: boolean }>((report) => report.id === 'start')),
  );
  return workers;
}

/** Sends one herd to every worker at once and collects their reports. */
export async function herd(
  workers: readonly Worker[],
  command: { key: string; callers: number; fillMs: number; mode?: 'push' | 'poll'; options: object },
  timeoutMs = 30_000,
): Promise<HerdReport[]> {
  const id = `${command.key}-${Math.random().toString(36).slice(2)}`;
  for (const worker of workers) worker.send({ cmd: 'herd', id, ...command });
  return Promise.all(
    workers.map((worker) =>
      worker.next<HerdReport>((report) => report.id === id && 'answered' in report, timeoutMs),
    ),
  );
}

/** Totals over the reports of one herd. */
export function totals(reports: readonly HerdReport[]) {
  return {
    fills: reports.reduce((sum, report) => sum + report.fills, 0),
    answered: reports.reduce((sum, report) => sum + report.answered, 0),
    errors: reports.flatMap((report) => report.errors),
    fillers: [...new Set(reports.flatMap((report) => report.fillers))],
    maxMs: Math.max(...reports.map((report) => report.maxMs)),
  };
}

/** Stops the workers (SIGKILL: they hold nothing worth a graceful exit). */
export async function stopWorkers(workers: readonly Worker[]): Promise<void> {
  await Promise.all(workers.map((worker) => worker.kill('SIGKILL')));
}
