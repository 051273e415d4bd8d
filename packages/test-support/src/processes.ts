import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ping } from './ports.js';

/** A redis-server process started on a port the caller chose (so it can be restarted on it). */
export interface RedisProcess {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGTERM, then SIGKILL after 3 s) and removes its directory. */
  stop(): Promise<void>;
}

function binary(name: string): string {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`${name} is not on PATH (install redis-server / redis-tools)`);
  }
}

/** Path of `redis-cli`, or a clear error. */
export function redisCliBinary(): string {
  return binary('redis-cli');
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Starts `redis-server` on `port` (127.0.0.1, no persistence, its own temporary directory) and waits
 * until it answers PING. `extraArgs` are passed through (cluster mode, for instance).
 */
export async function spawnRedisServer(
  port: number,
  extraArgs: readonly string[] = [],
): Promise<RedisProcess> {
  const dir = mkdtempSync(join(tmpdir(), `stampede-redis-${port}-`));
  const child = spawn(
    binary('redis-server'),
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...extraArgs,
    ],
    { stdio: 'ignore' },
  );
  const deadline = Date.now() + 10_000;
  // A server with requirepass answers PING with NOAUTH: that still means it is up.
  const guarded = extraArgs.includes('--requirepass');
  while (!(await ping('127.0.0.1', port, 200, guarded))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`redis-server on port ${port} did not start (exit code ${String(child.exitCode)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A node child process that talks JSON lines: commands on stdin, reports on stdout. */
export interface Worker {
  readonly pid: number;
  /** Writes `message` as one JSON line to the worker's stdin. */
  send(message: unknown): void;
  /** The next report (in order) that `match` accepts; earlier non-matching reports are dropped. */
  next<T = Record<string, unknown>>(match?: (report: T) => boolean, timeoutMs?: number): Promise<T>;
  /** Sends `signal` (default SIGTERM) and resolves once the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** What the worker wrote to stderr so far (for failure messages). */
  stderr(): string;
}

/**
 * Spawns `node <script> <args...>` as a {@link Worker}. Every stdout line must be JSON; a line that
 * is not fails the next `next()` with the line in the message.
 */
export function spawnWorker(
  script: string,
  args: readonly string[] = [],
  env: NodeJS.ProcessEnv = {},
): Worker {
  const child = spawn(process.execPath, [script, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const reports: unknown[] = [];
  const waiters: (() => void)[] = [];
  let errorText = '';
  let exited = false;
  const wakeAll = () => {
    for (const wake of waiters.splice(0)) wake();
  };
  child.stderr?.on('data', (chunk: Buffer) => {
    errorText += chunk.toString();
  });
  // biome-ignore lint/style/noNonNullAssertion: stdio is 'pipe'
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      reports.push(JSON.parse(line));
    } catch {
      reports.push(new Error(`worker ${child.pid} wrote a non-JSON line: ${line}`));
    }
    wakeAll();
  });
  child.once('exit', () => {
    exited = true;
    wakeAll();
  });
  return {
    pid: child.pid ?? -1,
    send(message) {
      child.stdin?.write(`${JSON.stringify(message)}\n`);
    },
    async next<T>(match: (report: T) => boolean = () => true, timeoutMs = 30_000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        while (reports.length !== 0) {
          const report = reports.shift();
          if (report instanceof Error) throw report;
          if (match(report as T)) return report as T;
        }
        if (exited) throw new Error(`worker ${child.pid} exited before reporting; stderr:\n${errorText}`);
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(`worker ${child.pid} did not report within ${timeoutMs}ms; stderr:\n${errorText}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    async kill(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const done = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await done;
    },
    stderr: () => errorText,
  };
}

/**
 * Starts `count` workers running `script` with `config` (as one JSON argument) and waits until each
 * reports `{ id: 'start' }`.
 */
export async function startWorkers(script: string, count: number, config: unknown): Promise<Worker[]> {
  const workers = Array.from({ length: count }, () => spawnWorker(script, [JSON.stringify(config)]));
  await Promise.all(workers.map((worker) => worker.next<{ id?: string }>((report) => report.id === 'start')));
  return workers;
}

/**
 * Sends `command` (with a fresh `id`) to every worker at once and collects, from each, the first
 * report with that id that `isAnswer` accepts.
 */
export function broadcast<R extends { id: string }>(
  workers: readonly Worker[],
  command: Record<string, unknown>,
  isAnswer: (report: R) => boolean,
  timeoutMs = 30_000,
): Promise<R[]> {
  const id = `${String(command.key ?? command.cmd)}-${Math.random().toString(36).slice(2)}`;
  for (const worker of workers) worker.send({ ...command, id });
  return Promise.all(
    workers.map((worker) => worker.next<R>((report) => report.id === id && isAnswer(report), timeoutMs)),
  );
}

/** How {@link runToExit} ended: the exit code (or `'still running'` when it was killed at the limit). */
export interface RunToExit {
  readonly code: number | null | 'still running';
  /** Everything the script wrote on stdout. */
  readonly stdout: string;
  /** When it exited (`Date.now()`), undefined when it was killed. */
  readonly exitedAt: number | undefined;
  /** How long the process lived after it first wrote `mark` on stdout (undefined if it never did or was killed). */
  readonly exitedAfterMarkMs: number | undefined;
}

/**
 * Runs `script` in a new Node process until it exits on its own, or kills it after `limitMs`: for
 * tests that nothing the packages leave behind keeps a process alive. stderr is inherited.
 */
export function runToExit(
  script: string,
  args: readonly string[],
  { limitMs, mark }: { limitMs: number; mark?: string },
): Promise<RunToExit> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  let markedAt: number | undefined;
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (markedAt === undefined && mark !== undefined && stdout.includes(mark)) markedAt = Date.now();
  });
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ code: 'still running', stdout, exitedAt: undefined, exitedAfterMarkMs: undefined });
    }, limitMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const exitedAt = Date.now();
      resolve({
        code,
        stdout,
        exitedAt,
        exitedAfterMarkMs: markedAt === undefined ? undefined : exitedAt - markedAt,
      });
    });
  });
}
