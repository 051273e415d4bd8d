import { fileURLToPath } from 'node:url';
import { type Cache, inFlightCount } from '@stampede/core';
import { broadcast, startWorkers, type Worker, waitFor } from '@stampede/test-support';

export { deletePrefix } from '@stampede/test-support';

/** Until the fills of `caches` have written: a flight answers its key's callers until then. */
export function written(...caches: Cache[]): Promise<unknown> {
  return waitFor(() => caches.every((cache) => inFlightCount(cache) === 0), { message: 'the writes' });
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
  /** A second Redis for the fill locks (the caches' `lockClient`). */
  lockUrl?: string;
  prefix: string;
  operationTimeout?: number;
}

const REPLICA = fileURLToPath(new URL('./fixtures/replica.mjs', import.meta.url));

/** Starts `count` replica processes and waits until each has its Redis connection ready. */
export function startReplicas(count: number, config: ReplicaConfig): Promise<Worker[]> {
  return startWorkers(REPLICA, count, config);
}

/** Sends one herd to every worker at once and collects their reports. */
export function herd(
  workers: readonly Worker[],
  command: { key: string; callers: number; fillMs: number; mode?: 'push' | 'poll'; options: object },
  timeoutMs = 30_000,
): Promise<HerdReport[]> {
  return broadcast<HerdReport>(
    workers,
    { cmd: 'herd', ...command },
    (report) => 'answered' in report,
    timeoutMs,
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
