import { fileURLToPath } from 'node:url';
import { broadcast, startWorkers, type Worker } from '@stampede/test-support';

/** What one app process reports after a herd. */
export interface HerdReport {
  id: string;
  pid: number;
  fills: number;
  answered: number;
  errors: string[];
  values: string[];
  maxMs: number;
  medianMs: number;
  inFlight: number;
  backendErrors: string[];
}

/** Configuration of an app process (test/fixtures/app.mjs). */
export interface AppConfig {
  readonly url: string;
  readonly prefix: string;
  readonly operationTimeout: number;
}

const APP = fileURLToPath(new URL('../fixtures/app.mjs', import.meta.url));

/** Starts `count` app processes and waits until each has its Redis connection ready. */
export function startApps(count: number, config: AppConfig): Promise<Worker[]> {
  return startWorkers(APP, count, config);
}

/** Waits until every app answers PING through whatever sits between it and Redis. */
export async function allReady(workers: readonly Worker[]): Promise<void> {
  await Promise.all(
    workers.map(async (worker) => {
      const id = `ready-${Math.random().toString(36).slice(2)}`;
      worker.send({ cmd: 'ready', id });
      const report = await worker.next<{ id: string; ready: boolean; error?: string }>(
        (r) => r.id === id,
        30_000,
      );
      if (!report.ready) throw new Error(`app ${worker.pid} never got Redis back: ${report.error}`);
    }),
  );
}

/** Sends one herd to every app at once and collects their reports. */
export function herd(
  workers: readonly Worker[],
  command: { key: string; callers: number; fillMs: number; options: object },
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
    values: [...new Set(reports.flatMap((report) => report.values))],
    inFlight: reports.reduce((sum, report) => sum + report.inFlight, 0),
    maxMs: Math.max(...reports.map((report) => report.maxMs)),
    backendErrors: [...new Set(reports.flatMap((report) => report.backendErrors))].sort(),
  };
}

/**
 * Asks every app to close its clients and waits for it to exit on its own; one that has not exited
 * after 5 s is killed, and that is an error (a leaked timer or socket).
 */
export async function closeApps(workers: readonly Worker[]): Promise<void> {
  const stuck: number[] = [];
  await Promise.all(
    workers.map(async (worker) => {
      worker.send({ cmd: 'close' });
      const exited = worker
        .next(() => false, 5_000)
        .then(
          () => true,
          (error: Error) => error.message.includes('exited'),
        );
      if (!(await exited)) {
        stuck.push(worker.pid);
        await worker.kill('SIGKILL');
      }
    }),
  );
  if (stuck.length !== 0) throw new Error(`app processes ${stuck.join(', ')} did not exit 5 s after close`);
}
