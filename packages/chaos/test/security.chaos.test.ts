import {
  getOrCompute,
  getOrComputeWith,
  getValue,
  invalidate,
  onStampedeEvent,
  type StampedeEvent,
  setValue,
} from '@stampede/core';
import { createRedisCache, redisKeys } from '@stampede/redis';
import { type RedisServer, randomPrefix, startRedisServer, testRedis } from '@stampede/test-support';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureOutput, deepText } from './support/capture.js';
import { type ChaosProxy, startProxy } from './support/proxy.js';
import { deletePrefix, sharedRedis, sleep } from './support/redis.js';
import { settle } from './support/settle.js';

const root = randomPrefix('chaos-security');
let client: Redis;

beforeAll(async () => {
  client = new Redis((await sharedRedis()).url);
});

afterAll(async () => {
  await deletePrefix(client, root);
  client.disconnect();
  await (await testRedis()).stop();
});

/** Keys with any code point, and keys built from the characters that matter to Redis names. */
const anyKey = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 24 }),
  fc.string({
    unit: fc.constantFrom(
      '{',
      '}',
      '%',
      '7',
      'B',
      'D',
      ' ',
      '\n',
      '\r',
      '\t',
      ':',
      '*',
      '?',
      '[',
      ']',
      '\\',
      '\0',
      'é',
      '😀',
      'lock',
      'done',
      '}:lock',
    ),
    minLength: 1,
    maxLength: 12,
  }),
);

/** How many Redis names start with `prefix`. */
async function namesUnder(prefix: string): Promise<string[]> {
  const escaped = prefix.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${escaped}*`, 'COUNT', 500);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

let runs = 0;
/** How long the secret test watches ioredis retry against a refusing proxy (ms). */
const REFUSED_WINDOW = 300;
/** How long the rotation test watches reconnects fail with WRONGPASS (ms). */
const WRONGPASS_WINDOW = 200;

describe('keys with any bytes are isolated (Redis adapter)', () => {
  it('writing key A never makes key B readable, nor takes its lock', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(anyKey, anyKey).filter(([a, b]) => a !== b),
        async ([a, b]) => {
          const prefix = `${root}iso${++runs}:`;
          const cache = createRedisCache({ client, prefix });
          await setValue(cache, a, { key: a });
          expect(await getValue(cache, a)).toEqual({ key: a });
          expect(await getValue(cache, b)).toBeUndefined();
          expect(await namesUnder(prefix)).toHaveLength(1);
          let fills = 0;
          expect(await getOrCompute(cache, b, 60_000, () => ++fills)).toBe(1);
          expect(await getValue(cache, a)).toEqual({ key: a });
          const lockA = await cache.tryAcquireFillLock?.(a, 5_000);
          const lockB = await cache.tryAcquireFillLock?.(b, 5_000);
          expect(lockA).toBeDefined();
          expect(lockB).toBeDefined();
          await lockA?.release('filled');
          await lockB?.release('filled');
          await invalidate(cache, a);
          expect(await getValue(cache, a)).toBeUndefined();
          expect(await getValue(cache, b)).toBe(1);
        },
      ),
      { numRuns: 80 },
    );
  });

  // Redis names are bytes; ioredis encodes a JS string as UTF-8, where every lone surrogate becomes
  // U+FFFD. redisKeys escapes only % { }, so '\uD800' and '\uDC00' land on the same Redis key.
  it('keys that differ only in lone surrogates stay isolated', async () => {
    const cache = createRedisCache({ client, prefix: `${root}surrogates:` });
    await setValue(cache, 'user:\uD800', 'secret of A');
    expect(await getValue(cache, 'user:\uDC00')).toBeUndefined();
  });

  it('two prefixes never see each other (fast-check prefixes, including braces)', async () => {
    const suffix = fc.string({
      unit: fc.constantFrom('a', 'b', ':', '{', '}', '%', ' ', '\n', 'x{1}'),
      maxLength: 8,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(suffix, suffix).filter(([p, q]) => p !== q),
        anyKey,
        anyKey,
        async ([p, q], a, b) => {
          const base = `${root}pfx${++runs}:`;
          const make = (suffixText: string) => {
            try {
              return createRedisCache({ client, prefix: base + suffixText });
            } catch (error) {
              // A prefix opening an empty hash tag is refused up front (RangeError), by design.
              expect(error).toBeInstanceOf(RangeError);
              return undefined;
            }
          };
          const one = make(p);
          const two = make(q);
          fc.pre(one !== undefined && two !== undefined);
          if (one === undefined || two === undefined) return;
          await setValue(one, a, 'from one');
          expect(await getValue(two, a)).toBeUndefined();
          expect(await getValue(two, b)).toBeUndefined();
          await setValue(two, b, 'from two');
          expect(await getValue(one, a)).toBe('from one');
          if (a !== b) expect(await getValue(one, b)).toBeUndefined();
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('the Redis password never leaks into errors, logs or events during faults', () => {
  const SECRET = `s3cret-token-${Math.random().toString(36).slice(2, 10)}`;
  let server: RedisServer;
  let proxy: ChaosProxy;
  let admin: Redis;

  beforeAll(async () => {
    // Our own server, password set right after start (test-support's readiness check is a bare
    // PING, which a server started with --requirepass answers with NOAUTH).
    server = await startRedisServer();
    const setup = new Redis({ port: server.port, host: '127.0.0.1' });
    await setup.config('SET', 'requirepass', SECRET);
    setup.disconnect();
    admin = new Redis({ port: server.port, host: '127.0.0.1', password: SECRET });
    proxy = await startProxy(server.port);
  });

  afterAll(async () => {
    admin?.disconnect();
    await proxy?.close();
    await server?.stop();
  });

  /** Runs `scenario` with console, stdout/stderr and events captured; returns everything seen. */
  async function observe(scenario: (seen: unknown[]) => Promise<void>): Promise<string> {
    const seen: unknown[] = [];
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    const output = captureOutput();
    try {
      await scenario(seen);
    } finally {
      output.stop();
      off();
    }
    return [
      output.text(),
      ...events.map((event) => JSON.stringify(event)),
      deepText(events),
      deepText(seen),
    ].join('\n');
  }

  it('drops, black holes, timeouts, garbage entries and failing fills: the secret appears nowhere', async () => {
    const text = await observe(async (seen) => {
      // As the README shows it: a URL with the password, no 'error' listener of the user's own.
      const app = new Redis(proxy.url(`:${SECRET}`));
      const cache = createRedisCache({ client: app, prefix: `${root}secret:`, operationTimeout: 200 });
      const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 500 };
      const calls = async (label: string) => {
        const outcomes = await Promise.all([
          settle(getOrComputeWith(cache, `${label}-a`, options, () => 'v')),
          settle(getOrComputeWith(cache, `${label}-b`, options, () => Promise.reject(new Error('db down')))),
          settle(setValue(cache, `${label}-c`, 'v')),
          settle(invalidate(cache, `${label}-a`)),
        ]);
        seen.push(...outcomes);
      };
      await calls('healthy');
      await admin.set(redisKeys(`${root}secret:`, 'garbage').value, 's1|x|y|z|{');
      seen.push(await settle(getOrCompute(cache, 'garbage', 1_000, () => 'v')));
      proxy.set({ kind: 'latency', ms: 300 });
      await calls('slow');
      proxy.set({ kind: 'blackhole' });
      await calls('blackhole');
      proxy.set({ kind: 'refuse' });
      await calls('refused');
      // The scenario: ioredis keeps reconnecting against a refusing proxy for a while, and whatever it
      // reports meanwhile (errors, events) is observed too.
      await sleep(REFUSED_WINDOW);
      proxy.set({ kind: 'pass' });
      await app.ping();
      await cache.close();
      app.disconnect();
    });
    expect(text.length).toBeGreaterThan(0);
    expect(text).toContain('E_STAMPEDE_BACKEND_TIMEOUT');
    expect(text).not.toContain(SECRET);
  });

  // ioredis puts the failing command's arguments on every reply error (err.command.args). When the
  // password is rotated and a connection drops, ioredis re-sends AUTH <old password>, gets WRONGPASS
  // and rejects the queued commands with that very error; @stampede/redis passes it on unredacted as
  // the backend-error event's `error` (and as setValue's rejection), so JSON.stringify(event) carries
  // the password.
  it('a rotated password and a reconnect do not put the old password in events', async () => {
    const text = await observe(async (seen) => {
      const app = new Redis(proxy.url(`:${SECRET}`));
      app.on('error', () => {});
      const cache = createRedisCache({ client: app, prefix: `${root}rotate:`, operationTimeout: 500 });
      await app.ping();
      await admin.config('SET', 'requirepass', `${SECRET}-next`);
      try {
        proxy.dropAll();
        const outcomes = await Promise.all([
          settle(getOrComputeWith(cache, 'rotated', { ttl: 60_000 }, () => 'v')),
          settle(setValue(cache, 'rotated-2', 'v')),
        ]);
        seen.push(...outcomes);
        // The scenario: reconnects re-sending the old password keep failing for a while; what they
        // report in that window is observed too.
        await sleep(WRONGPASS_WINDOW);
      } finally {
        await admin.config('SET', 'requirepass', SECRET);
        await cache.close();
        app.disconnect();
      }
    });
    expect(text).toContain('WRONGPASS');
    expect(text).not.toContain(SECRET);
  });
});
