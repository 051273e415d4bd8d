import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

/** A redis-server process this harness started. */
export interface RedisServer {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its directory. */
  stop(): Promise<void>;
}

/**
 * Sends PING over a raw socket; true on +PONG within `timeoutMs` (or, with `authIsAlive`, on the
 * NOAUTH error a server with `requirepass` answers).
 */
export function ping(host: string, port: number, timeoutMs = 500, authIsAlive = false): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      const reply = data.toString();
      done(reply.startsWith('+PONG') || (authIsAlive && reply.startsWith('-NOAUTH')));
    });
    socket.on('error', () => done(false));
  });
}

function redisServerBinary(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(
      'redis-server is not on PATH and no Redis answers on 127.0.0.1:6379 (set REDIS_URL, or install redis-server)',
    );
  }
}

/** Starts `redis-server` on a free port with no persistence; `extraArgs` are passed through. */
export async function startRedisServer(extraArgs: readonly string[] = []): Promise<RedisServer> {
  const binary = redisServerBinary();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'stampede-redis-'));
  const child: ChildProcess = spawn(
    binary,
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
  const guarded = extraArgs.includes('--requirepass');
  while (!(await ping('127.0.0.1', port, 200, guarded))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(
        child.exitCode !== null
          ? `redis-server on port ${port} exited with code ${child.exitCode}`
          : `redis-server on port ${port} did not answer within 10 s`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let shared: Promise<{ url: string; stop: () => Promise<void> }> | undefined;

/**
 * The Redis the integration tests use: `REDIS_URL` if set, else 127.0.0.1:6379 if it answers, else
 * a `redis-server` started from PATH on a free port (stopped by the returned `stop`). None of these:
 * a clear error (never a silent skip).
 */
export function testRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  shared ??= (async () => {
    const fromEnv = process.env.REDIS_URL;
    if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv, stop: async () => {} };
    if (await ping('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', stop: async () => {} };
    const server = await startRedisServer();
    return { url: server.url, stop: () => server.stop() };
  })();
  return shared;
}

/** A random key prefix for one test run: tests clean only their own prefix. */
export function randomPrefix(label = 'test'): string {
  return `stampede-${label}-${process.pid}-${Math.random().toString(36).slice(2, 10)}:`;
}
