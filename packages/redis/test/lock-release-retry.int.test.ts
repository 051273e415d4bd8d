import { type BackendErrorEvent, getOrComputeWith, onStampedeEvent, whenIdle } from '@stampede/core';
import { fillLockHandle } from '@stampede/redis-protocol';
import {
  type RedisServer,
  randomPrefix,
  startRedisServer,
  type Worker,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../src/context.js';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { herd, startReplicas, stopWorkers } from './helpers.js';

// A fill lock whose release, or commit (write + release + announcement in one script), fails on a
// moment's fault. The fault is real: a script another client runs past `lua-time-limit` makes Redis
// answer BUSY to every other command until SCRIPT KILL. Before the fix the release was never sent
// again: the lock lived out its lockTtl (10 s) and the other replica's next call on the key, against
// a healthy server, waited out lockWaitTimeout (5 s) and filled on its own. Now the holder sends the
// release again (50 ms, doubling) until it lands, and the other replica gets the lock at once or is
// woken by the announcement. The holder runs here (the test times the fault inside its fill); the
// other replica is its own process (fixtures/replica.mjs).

const LOCK_WAIT_TIMEOUT = 5_000;
const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: LOCK_WAIT_TIMEOUT };
// Generous for a loaded machine; before the fix the call took lockWaitTimeout and more.
const PROMPT_MS = 2_000;

let values: RedisServer;
let locks: RedisServer;
let admin: Redis;
let lockAdmin: Redis;
let client: Redis;
let lockClient: Redis;
const prefix = randomPrefix('release-retry');
const events: BackendErrorEvent[] = [];
let stopListening: () => void;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes the server at `url` answer BUSY to every command (a never-ending script past
 * `lua-time-limit`); `end()` kills the script, and the server serves again at once.
 */
async function busyServer(url: string) {
  const runner = new Redis(url);
  const probe = new Redis(url);
  runner.on('error', () => {});
  await Promise.all([runner.ping(), probe.ping()]);
  const running = runner.eval('while true do end', 0).catch(() => undefined);
  for (;;) {
    const answer = await probe.ping().then(
      () => 'PONG',
      (error: unknown) => String(error),
    );
    if (/BUSY/.test(answer)) break;
    if (answer !== 'PONG') throw new Error(`unexpected answer while making Redis busy: ${answer}`);
    await sleep(1);
  }
  return {
    async end() {
      await probe.script('KILL');
      await running;
      runner.disconnect();
      probe.disconnect();
    },
  };
}

/** Until `cacheName` has reported a `release` fault. */
async function releaseFailed(cacheName: string) {
  const deadline = Date.now() + 10_000;
  while (!events.some((event) => event.cache === cacheName && event.operation === 'release')) {
    if (Date.now() > deadline) throw new Error(`no release fault from ${cacheName}`);
    await sleep(1);
  }
}

function faultsOf(cacheName: string) {
  return events.filter((event) => event.cache === cacheName).map((event) => event.operation);
}

beforeAll(async () => {
  // Own servers: the test makes them refuse every command for a moment.
  [values, locks] = await Promise.all([
    startRedisServer(['--lua-time-limit', '10']),
    startRedisServer(['--lua-time-limit', '10']),
  ]);
  admin = new Redis(values.url);
  lockAdmin = new Redis(locks.url);
  client = new Redis(values.url);
  lockClient = new Redis(locks.url);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'backend-error') events.push(event);
  });
});
afterAll(async () => {
  stopListening();
  for (const each of [admin, lockAdmin, client, lockClient]) each.disconnect();
  await Promise.all([values.stop(), locks.stop()]);
});

describe("a fill lock whose release fails on a moment's fault (Redis answering BUSY)", () => {
  let holder: RedisCache;
  let other: Worker[];
  const started: RedisCache[] = [];
  const start = async (name: string, separateLocks = false) => {
    holder = createRedisCache({
      client,
      ...(separateLocks ? { lockClient } : {}),
      prefix,
      name,
      operationTimeout: 1_000,
    });
    started.push(holder);
    other = await startReplicas(1, {
      url: values.url,
      ...(separateLocks ? { lockUrl: locks.url } : {}),
      prefix,
      operationTimeout: 1_000,
    });
  };
  afterAll(async () => {
    await Promise.all(started.map((cache) => cache.close()));
  });

  /** The holder fills `key`, the server at `faultUrl` turning BUSY inside its fill, which `ends`. */
  async function holdThroughFault(key: string, faultUrl: string, ends: 'value' | 'error') {
    let fault: Awaited<ReturnType<typeof busyServer>> | undefined;
    const answer = await getOrComputeWith(holder, key, options, async () => {
      fault = await busyServer(faultUrl);
      if (ends === 'error') throw new Error('the fill failed');
      return 'from the holder';
    }).then(
      (value) => value,
      (error: unknown) => (error as Error).message,
    );
    return { answer, fault: fault as NonNullable<typeof fault> };
  }

  /** The other replica's next call on `key`, made right after the server serves again. */
  async function otherReplicaCalls(key: string) {
    const [report] = await herd(other, { key, callers: 1, fillMs: 0, options }, 20_000);
    return report as NonNullable<typeof report>;
  }

  it('commit path: the failed commit is not written again, the lock is released and the other replica fills at once', async () => {
    await start('retry-commit');
    try {
      const key = 'commit';
      const { answer, fault } = await holdThroughFault(key, values.url, 'value');
      // The fill's callers have their value whatever the backend did.
      expect(answer).toBe('from the holder');
      await releaseFailed('retry-commit');
      await fault.end();
      const report = await otherReplicaCalls(key);
      console.log(
        `[release retry] commit + release refused (BUSY), server back: the other replica answered in ${report.maxMs} ms (lockWaitTimeout ${LOCK_WAIT_TIMEOUT} ms)`,
      );
      expect(report.errors).toEqual([]);
      expect(report.maxMs).toBeLessThan(PROMPT_MS);
      // The commit did not land and is not written again: the other replica fills it.
      expect(report.fills).toBe(1);
      expect(await whenIdle(holder, { timeout: '5s' })).toBe(true);
      // One report per failed call: the commit (`set`) and its release, none per retry.
      expect(faultsOf('retry-commit')).toEqual(['set', 'release']);
      expect(await admin.get(redisKeys(prefix, key).lock)).toBeNull();
    } finally {
      await stopWorkers(other);
    }
  });

  it('release path (the fill failed): the lock is released as failed and the other replica fills at once', async () => {
    await start('retry-failed');
    try {
      const key = 'failed';
      const { answer, fault } = await holdThroughFault(key, values.url, 'error');
      expect(answer).toBe('the fill failed');
      await releaseFailed('retry-failed');
      await fault.end();
      const report = await otherReplicaCalls(key);
      console.log(
        `[release retry] release refused (BUSY), server back: the other replica answered in ${report.maxMs} ms (lockWaitTimeout ${LOCK_WAIT_TIMEOUT} ms)`,
      );
      expect(report.errors).toEqual([]);
      expect(report.maxMs).toBeLessThan(PROMPT_MS);
      expect(report.fills).toBe(1);
      expect(await whenIdle(holder, { timeout: '5s' })).toBe(true);
      expect(faultsOf('retry-failed')).toEqual(['release']);
      expect(await admin.get(redisKeys(prefix, key).lock)).toBeNull();
    } finally {
      await stopWorkers(other);
    }
  });

  it('release path (locks on a lockClient): the value is written, the release retried, and the other replica reads the value without a fill', async () => {
    await start('retry-filled', true);
    try {
      const key = 'filled';
      // Only the lock server turns BUSY: the write lands, the release after it does not.
      const { answer, fault } = await holdThroughFault(key, locks.url, 'value');
      expect(answer).toBe('from the holder');
      await releaseFailed('retry-filled');
      await fault.end();
      const report = await otherReplicaCalls(key);
      console.log(
        `[release retry] release on the lock server refused (BUSY), server back: the other replica answered in ${report.maxMs} ms (lockWaitTimeout ${LOCK_WAIT_TIMEOUT} ms)`,
      );
      expect(report.errors).toEqual([]);
      expect(report.maxMs).toBeLessThan(PROMPT_MS);
      expect(report.fills).toBe(0);
      expect(await whenIdle(holder, { timeout: '5s' })).toBe(true);
      expect(faultsOf('retry-filled')).toEqual(['release']);
      expect(await lockAdmin.get(redisKeys(prefix, key).lock)).toBeNull();
    } finally {
      await stopWorkers(other);
    }
  });
});

describe('a fill lock granted after its time-out', () => {
  // The grant's command waits out a `CLIENT PAUSE WRITE` (past operationTimeout, so the caller has
  // given up on it) and lands when the pause ends; the server then runs a script queued behind it
  // past `lua-time-limit`, so the release of that unused lock is answered BUSY. Before, it was sent
  // once and the lock lived out its TTL (a minute here).
  const started: RedisCache[] = [];
  afterAll(async () => {
    await Promise.all(started.map((cache) => cache.close()));
  });

  async function grantedLate(name: string, acquire: (cache: RedisCache) => Promise<unknown>) {
    const cache = createRedisCache({ client, prefix, name, operationTimeout: 200, pushWakeUp: false });
    started.push(cache);
    // Warmed up (scripts loaded, clock measured) before the pause: only the grant waits it out.
    await cache.get('warm');
    await admin.client('PAUSE', 600, 'WRITE');
    const refused = expect(acquire(cache)).rejects.toThrow(/did not answer within 200ms/);
    await waitFor(async () => /blocked_clients:[1-9]/.test(await admin.info('clients')), {
      message: 'the grant to wait out the pause',
    });
    // Queued behind the grant: it runs right after it, before the grant's release comes in.
    const fault = await busyServer(values.url);
    try {
      await refused;
      await releaseFailed(name);
    } finally {
      await fault.end();
    }
  }

  it('SET NX: the release is retried once the server serves again', async () => {
    const key = 'late-grant';
    await grantedLate('late-grant', (cache) => cache.tryAcquireFillLock?.(key, 60_000) as Promise<unknown>);
    await waitFor(async () => (await admin.exists(redisKeys(prefix, key).lock)) === 0, {
      message: 'the late grant to be released',
    });
    expect(faultsOf('late-grant')).toEqual(['release']);
  });

  it('lock and read in one script: the same', async () => {
    const key = 'late-grant-read';
    await grantedLate(
      'late-grant-read',
      (cache) => cache.tryAcquireFillLockAndRead?.(key, 60_000) as Promise<unknown>,
    );
    await waitFor(async () => (await admin.exists(redisKeys(prefix, key).lock)) === 0, {
      message: 'the late grant to be released',
    });
    expect(faultsOf('late-grant-read')).toEqual(['release']);
  });
});

describe('settling the retries of failed releases (what close() does)', () => {
  /** A lock on `key` held with a token of the test's own, and its handle on a fresh context. */
  async function heldLock(name: string, key: string) {
    const context = createContext(client, name, prefix, 1_000);
    const lockKey = redisKeys(prefix, key).lock;
    await admin.set(lockKey, `${name}-token`, 'PX', 60_000);
    return {
      context,
      lockKey,
      lock: fillLockHandle(context.protocol, key, `${name}-token`, undefined, 60_000),
    };
  }

  it('a fault that outlasts the last attempt: the retries stop, and release() settles, while the server is still busy', async () => {
    const { context, lockKey, lock } = await heldLock('settle-busy', 'settle-busy');
    const fault = await busyServer(values.url);
    try {
      let released = false;
      void Promise.resolve(lock.release('failed')).then(() => {
        released = true;
      });
      await releaseFailed('settle-busy');
      await context.protocol.releaseRetries.settle();
      // The release's own continuations, no I/O: all run before the next macrotask.
      await new Promise((resolve) => setImmediate(resolve));
      expect(released).toBe(true);
    } finally {
      await fault.end();
    }
    // Not released: nothing was sent after the last attempt (the lock lapses after its TTL).
    expect(await admin.get(lockKey)).toBe('settle-busy-token');
    expect(faultsOf('settle-busy')).toEqual(['release']);
    await admin.del(lockKey);
  });

  it('the server serves again: the last attempt, sent at once, releases the lock before settle() resolves', async () => {
    const { context, lockKey, lock } = await heldLock('settle-back', 'settle-back');
    const fault = await busyServer(values.url);
    const release = lock.release('filled');
    try {
      await releaseFailed('settle-back');
    } finally {
      await fault.end();
    }
    await context.protocol.releaseRetries.settle();
    expect(await admin.get(lockKey)).toBeNull();
    await release;
    expect(faultsOf('settle-back')).toEqual(['release']);
  });
});
