// Redis helpers: a reachability check, a random key prefix per run, cleanup of only that prefix
// (SCAN + UNLINK, never FLUSHALL) and `INFO commandstats` snapshots.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** A new ioredis client on `url` that fails fast instead of queueing while Redis is down. */
export function connect(url, extra = {}) {
  return new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 2_000, lazyConnect: false, ...extra });
}

/** `undefined` when Redis answers PING on `url`, else the reason it does not. */
export async function unreachable(url) {
  const client = new Redis(url, {
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    retryStrategy: () => null,
    lazyConnect: true,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    client.disconnect();
  }
}

/** A prefix no other run uses: `stampede-bench:<random>:`. */
export function randomPrefix() {
  return `stampede-bench:${randomBytes(6).toString('hex')}:`;
}

/** Deletes every key that starts with `prefix` (and only those). Returns how many. */
export async function cleanPrefix(client, prefix) {
  let cursor = '0';
  let removed = 0;
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
    cursor = next;
    if (keys.length > 0) removed += await client.unlink(...keys);
  } while (cursor !== '0');
  return removed;
}

/** `{ command: calls }` from `INFO commandstats` (the INFO call itself excluded). */
export async function commandStats(client) {
  const text = await client.info('commandstats');
  const calls = {};
  for (const line of text.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match && match[1] !== 'info') calls[match[1]] = Number(match[2]);
  }
  return calls;
}

/** The per-command difference `after - before`, zero entries left out. */
export function commandDelta(before, after) {
  const delta = {};
  for (const [command, calls] of Object.entries(after)) {
    const d = calls - (before[command] ?? 0);
    if (d > 0) delta[command] = d;
  }
  return delta;
}

/**
 * Counts the commands every ioredis client of this package sends (the clients the peers get from
 * `connect`, and their duplicates), so round trips can be told from the commands Redis runs inside
 * Lua scripts, which `INFO commandstats` counts too. Returns `{ counts, stop }`.
 */
export function countSentCommands() {
  const counts = {};
  const watchers = new Set();
  const original = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function sendCommand(command, stream) {
    const name = String(command?.name ?? '').toLowerCase();
    if (name !== 'info') counts[name] = (counts[name] ?? 0) + 1;
    for (const watcher of watchers) watcher(this, name, command);
    return original.call(this, command, stream);
  };
  return {
    counts,
    /**
     * Calls `watcher(client, name, command)` for every command sent until the returned function is
     * called.
     */
    watch(watcher) {
      watchers.add(watcher);
      return () => watchers.delete(watcher);
    },
    stop() {
      Redis.prototype.sendCommand = original;
    },
  };
}

/**
 * Whether a command is stampede's background measurement of the server clock: a script without keys
 * (`EVALSHA`/`EVAL` with 0 keys; stampede's other scripts all name their keys). A read starts one now
 * and then (every 10 s, every 250 ms while the last measurement was slow) and no call awaits it, so a
 * count of a call's round trips leaves it out.
 */
export function isClockScript(name, command) {
  return (name === 'evalsha' || name === 'eval') && Number(command?.args?.[1]) === 0;
}

/**
 * Runs `create` and returns what it made with the set of ioredis clients constructed meanwhile
 * (each connects in its constructor), so the commands of one instance can be told from another's.
 */
export async function createOwned(create) {
  const owned = new Set();
  const original = Redis.prototype.connect;
  Redis.prototype.connect = function connectOwned(...args) {
    owned.add(this);
    return original.apply(this, args);
  };
  try {
    return { instance: await create(), owned };
  } finally {
    Redis.prototype.connect = original;
  }
}

/**
 * A `redis-server` of the bench's own on a free port (no persistence), so `INFO commandstats`
 * counts only the commands of the scenario that started it. `{ url, stop }`; throws when
 * `redis-server` is not on PATH.
 */
export async function startPrivateRedis() {
  const { spawn } = await import('node:child_process');
  const { createServer } = await import('node:net');
  const port = await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port: free } = server.address();
      server.close(() => resolve(free));
    });
  });
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const spawnError = new Promise((_, reject) => child.once('error', reject));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 5_000;
  for (;;) {
    const reason = await Promise.race([unreachable(url), spawnError]);
    if (reason === undefined) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server on port ${port} did not answer: ${reason}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
