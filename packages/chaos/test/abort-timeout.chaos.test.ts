import {
  type FillContext,
  getOrComputeWith,
  getValue,
  inFlightCount,
  isCacheFillError,
  statsByCache,
} from '@stampede/core';
import { createRedisCache, type RedisCache, redisKeys } from '@stampede/redis';
import { deferred, randomPrefix, testRedis, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ChaosProxy, startProxy } from './support/proxy.js';
import { deletePrefix, sharedRedis } from './support/redis.js';
import { hangsForever, neverSettles, settle } from './support/settle.js';

// In this process: a Redis cache whose client goes through the chaos proxy (so a read can be made
// slow), and a direct client to look at what is stored.
const OPERATION_TIMEOUT = 1_000;
const FILL_TIMEOUT = 300;
const SLACK = 500;
// The shared cache's name: its counters (`statsByCache`) tell when a caller's read has answered.
const NAME = 'chaos-abort';
// The isolated caches' name (tests run one at a time, so their counters are read as deltas).
const ZOMBIE = 'zombie';
const prefix = randomPrefix('chaos-abort');
let direct: Redis;
let proxied: Redis;
let proxy: ChaosProxy;
let auth: string | undefined;
let cache: RedisCache;
const isolated: { client: Redis; cache: RedisCache }[] = [];
let keys = 0;
const freshKey = (label: string) => `${label}-${++keys}`;

beforeAll(async () => {
  const redis = await sharedRedis();
  direct = new Redis(redis.url);
  proxy = await startProxy(redis.port, redis.host);
  auth = redis.auth;
  proxied = new Redis(proxy.url(auth));
  cache = createRedisCache({ client: proxied, prefix, name: NAME, operationTimeout: OPERATION_TIMEOUT });
  await proxied.ping();
});

afterEach(() => {
  proxy.set({ kind: 'pass' });
});

/**
 * A cache on its own client through the proxy, for the tests that leave a zombie fill behind (they
 * would otherwise pollute the shared cache's registry and the proxy's byte count).
 */
function isolatedCache(): RedisCache {
  const client = new Redis(proxy.url(auth));
  client.on('error', () => {});
  const own = createRedisCache({ client, prefix, name: ZOMBIE, operationTimeout: OPERATION_TIMEOUT });
  isolated.push({ client, cache: own });
  return own;
}

afterAll(async () => {
  for (const { client, cache: own } of isolated) {
    await own.close();
    client.disconnect();
  }
  await cache?.close();
  proxied?.disconnect();
  await proxy?.close();
  await deletePrefix(direct, prefix);
  direct.disconnect();
  await (await testRedis()).stop();
});

/** Waits (at most 2 s) for writes and releases that run after the callers have their answer. */
async function registryEmpties(): Promise<number> {
  await waitFor(() => inFlightCount(cache) === 0, { timeout: 2_000, message: 'the registry to empty' });
  return inFlightCount(cache);
}

/** Reads of the caches named `name` that have answered so far: as a hit, a miss, or after their caller left. */
function readsAnswered(name: string): number {
  const counters = statsByCache()[name];
  if (counters === undefined) return 0;
  return counters.hits + counters.staleHits + counters.misses + counters.abortedReads;
}

/**
 * Returns once every command the cache issued so far has been answered by Redis. The first round trip
 * on the cache's own connection lets every pending promise chain issue its commands; the second is
 * answered after all of them (one connection answers in order). Proves "nothing was written" without
 * a sleep.
 */
async function redisCaughtUp(): Promise<void> {
  await proxied.ping();
  await proxied.ping();
}

/** Resolves once the proxy has received (not yet forwarded) a request sent after `before` bytes. */
function requestInProxy(before: number, what: string): Promise<true> {
  return waitFor(() => proxy.bytesReceived > before, { timeout: 2_000, message: what });
}

const lockModes = [
  { name: 'without the lock', lock: false },
  { name: 'with distributedFillLock', lock: true },
] as const;

describe.each(lockModes)('a fill that never settles, Redis adapter, $name', ({ lock }) => {
  it('with fillTimeout: every caller gets CacheFillError kind timeout within the bound; the registry empties', async () => {
    const key = freshKey('timeout');
    const contexts: FillContext[] = [];
    const options = { ttl: 60_000, fillTimeout: FILL_TIMEOUT, distributedFillLock: lock };
    const callers = await Promise.all(
      Array.from({ length: 10 }, () =>
        settle(
          getOrComputeWith(cache, key, options, (context) => {
            contexts.push(context);
            return neverSettles(context.signal);
          }),
        ),
      ),
    );
    // The timer starts with the flight: one read before it, then fillTimeout.
    const bound = OPERATION_TIMEOUT + FILL_TIMEOUT + SLACK;
    console.log(
      `[abort] fillTimeout ${FILL_TIMEOUT} ms (${lock ? 'lock' : 'no lock'}): slowest caller released after ${Math.round(Math.max(...callers.map((c) => c.ms)))} ms (bound ${bound})`,
    );
    for (const caller of callers) {
      expect(caller.ok).toBe(false);
      if (caller.ok) continue;
      expect(isCacheFillError(caller.error)).toBe(true);
      expect(caller.error).toMatchObject({ kind: 'timeout', key });
      expect(caller.ms).toBeLessThanOrEqual(bound);
    }
    expect(contexts).toHaveLength(1);
    expect(contexts[0]?.signal.aborted).toBe(true);
    expect(await registryEmpties()).toBe(0);
    expect(await direct.get(redisKeys(prefix, key).value)).toBeNull();
    // The key can be filled again.
    expect(
      await getOrComputeWith(cache, key, { ttl: 60_000, distributedFillLock: lock }, () => 'again'),
    ).toBe('again');
  });

  it("without fillTimeout: each caller's own signal releases it; the last to leave empties the registry and aborts the fill", async () => {
    const key = freshKey('no-timeout');
    const contexts: FillContext[] = [];
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const readsBefore = readsAnswered(NAME);
    const callers = controllers.map((controller) =>
      settle(
        getOrComputeWith(
          cache,
          key,
          { ttl: 60_000, distributedFillLock: lock, signal: controller.signal },
          (context) => {
            contexts.push(context);
            return neverSettles(context.signal);
          },
        ),
      ),
    );
    // Every caller has read (a miss) and so started or joined the one fill, and the fill is running.
    await waitFor(() => readsAnswered(NAME) - readsBefore === 5 && contexts.length === 1, {
      message: 'the 5 callers to be waiting on one running fill',
    });
    for (const [i, controller] of controllers.entries()) {
      expect(inFlightCount(cache)).toBe(1);
      const reason = new Error(`caller ${i} left`);
      controller.abort(reason);
      const outcome = await callers[i];
      expect(outcome).toMatchObject({ ok: false, error: reason });
    }
    expect(await registryEmpties()).toBe(0);
    expect(contexts).toHaveLength(1);
    expect(contexts[0]?.signal.aborted).toBe(true);
    expect(await direct.get(redisKeys(prefix, key).value)).toBeNull();
    const again = await settle(
      getOrComputeWith(cache, key, { ttl: 60_000, distributedFillLock: lock }, () => 'again'),
    );
    expect(again).toMatchObject({ ok: true, value: 'again' });
  });
});

describe('a fill that ignores its signal and never settles, with the lock (zombie fill)', () => {
  // The flight is released by fillTimeout, but the fill function itself never returns. The lock it
  // holds must not outlive the flight: otherwise every later fill of the key, on every replica,
  // waits the full lockWaitTimeout.
  it('after fillTimeout the lock is released at once, so the next fill does not wait lockWaitTimeout', async () => {
    const cache = isolatedCache();
    const key = freshKey('zombie');
    const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 600, lockWaitTimeout: 2_000 };
    const first = await settle(
      getOrComputeWith(cache, key, { ...options, fillTimeout: FILL_TIMEOUT }, hangsForever),
    );
    expect(first).toMatchObject({ ok: false, error: { kind: 'timeout' } });
    expect(inFlightCount(cache)).toBe(0);
    // Within two lock TTLs, a lock whose flight is over must have been released or lapsed.
    await waitFor(async () => (await direct.pttl(redisKeys(prefix, key).lock)) === -2, {
      timeout: 2 * options.lockTtl,
      message: "the zombie fill's lock to be released",
    });
    const again = await settle(getOrComputeWith(cache, key, options, () => 'again'));
    expect(again).toMatchObject({ ok: true, value: 'again' });
    expect(again.ms).toBeLessThan(options.lockWaitTimeout);
  });
});

describe.each(lockModes)('a caller may abort in every phase, Redis adapter, $name', ({ lock }) => {
  const base = { ttl: 60_000, distributedFillLock: lock };

  it('before the read: rejects with its reason, nothing is sent to Redis', async () => {
    const key = freshKey('before-read');
    const controller = new AbortController();
    const reason = new Error('left before the read');
    controller.abort(reason);
    const sent = proxy.bytesUp;
    let fills = 0;
    const outcome = await settle(
      getOrComputeWith(cache, key, { ...base, signal: controller.signal }, () => ++fills),
    );
    expect(outcome).toMatchObject({ ok: false, error: reason });
    expect(fills).toBe(0);
    expect(proxy.bytesUp).toBe(sent);
    expect(inFlightCount(cache)).toBe(0);
  });

  it('during a slow Redis read (300 ms through the proxy): rejects as soon as it aborts', async () => {
    // Its own cache, so nothing it might leave behind touches the other tests.
    const cache = isolatedCache();
    const key = freshKey('slow-read');
    proxy.set({ kind: 'latency', ms: 150 });
    const controller = new AbortController();
    const reason = new Error('left during the read');
    const received = proxy.bytesReceived;
    const caller = settle(
      getOrComputeWith(cache, key, { ...base, signal: controller.signal }, (ctx) => neverSettles(ctx.signal)),
    );
    // The read is in the proxy: its answer is at least 300 ms away.
    await requestInProxy(received, 'the read to reach the proxy');
    const abortedAt = performance.now();
    controller.abort(reason);
    const outcome = await caller;
    const afterAbort = performance.now() - abortedAt;
    console.log(
      `[abort] aborted during a 300 ms read (${lock ? 'lock' : 'no lock'}): settled ${Math.round(afterAbort)} ms after the abort`,
    );
    expect(outcome).toMatchObject({ ok: false, error: reason });
    expect(afterAbort).toBeLessThan(SLACK);
  });

  // The read answers after the caller left: no flight may start for it (found by this suite: core
  // once started a fill for nobody, whose signal never aborted and which, if it never settled, stayed
  // in the registry for good, so every later caller of the key coalesced onto it and hung).
  it('a caller that aborted during the read leaves no fill behind (registry empty)', async () => {
    const cache = isolatedCache();
    const key = freshKey('slow-read-zombie');
    proxy.set({ kind: 'latency', ms: 150 });
    const controller = new AbortController();
    let fills = 0;
    const received = proxy.bytesReceived;
    const readsBefore = readsAnswered(ZOMBIE);
    const caller = settle(
      getOrComputeWith(cache, key, { ...base, signal: controller.signal }, (ctx) => {
        fills++;
        return neverSettles(ctx.signal);
      }),
    );
    await requestInProxy(received, 'the read to reach the proxy');
    controller.abort(new Error('left during the read'));
    expect((await caller).ok).toBe(false);
    proxy.set({ kind: 'pass' });
    // The read answers after its caller left. Had core started a fill for nobody, the flight would be
    // registered in the same step that counts the read as a miss instead of an aborted read.
    await waitFor(() => readsAnswered(ZOMBIE) > readsBefore, { message: 'the abandoned read to answer' });
    expect(statsByCache()[ZOMBIE]?.abortedReads).toBeGreaterThan(0);
    expect(inFlightCount(cache)).toBe(0);
    expect(fills).toBe(0);
    // What a user sees: a later caller (even one with its own fillTimeout) joins the zombie and hangs.
    // The race's deadline only turns such a hang into a readable failure.
    const later = await Promise.race([
      settle(getOrComputeWith(cache, key, { ...base, fillTimeout: 1_000 }, () => 'later')),
      new Promise((resolve) => setTimeout(resolve, 2_000, 'still waiting after 2 s')),
    ]);
    expect(later).toMatchObject({ ok: true, value: 'later' });
  });

  it('after the fill settled: aborting later changes nothing', async () => {
    const key = freshKey('after-settle');
    const controller = new AbortController();
    const value = await getOrComputeWith(cache, key, { ...base, signal: controller.signal }, () => 'kept');
    controller.abort(new Error('too late'));
    expect(value).toBe('kept');
    expect(await registryEmpties()).toBe(0);
    expect(await getValue(cache, key)).toBe('kept');
  });

  it('during the fill: rejects at once with its reason; the fill is aborted, nothing written, registry empty', async () => {
    const key = freshKey('during-fill');
    const controller = new AbortController();
    const reason = new Error('left during the fill');
    let context: FillContext | undefined;
    const caller = settle(
      getOrComputeWith(cache, key, { ...base, signal: controller.signal }, (ctx) => {
        context = ctx;
        return neverSettles(ctx.signal);
      }),
    );
    context = await waitFor(() => context, { message: 'the fill to start' });
    const abortedAt = performance.now();
    controller.abort(reason);
    const outcome = await caller;
    expect(outcome).toMatchObject({ ok: false, error: reason });
    expect(performance.now() - abortedAt).toBeLessThan(SLACK);
    expect(context.signal.aborted).toBe(true);
    expect(await registryEmpties()).toBe(0);
    await redisCaughtUp();
    expect(await direct.get(redisKeys(prefix, key).value)).toBeNull();
    // The abandoned fill rejected, so its lock was released.
    if (lock) expect(await direct.exists(redisKeys(prefix, key).lock)).toBe(0);
  });

  it('during the fill, with a patient caller: the leaver rejects, the other gets the value and it is written', async () => {
    const key = freshKey('one-leaves');
    const controller = new AbortController();
    const reason = new Error('left');
    // The fill runs until the test releases it, after the leaver has left.
    const gate = deferred<string>();
    let fillStarted = false;
    const leaver = settle(
      getOrComputeWith(cache, key, { ...base, signal: controller.signal }, () => {
        fillStarted = true;
        return gate.promise;
      }),
    );
    await waitFor(() => fillStarted, { message: "the leaver's fill to start" });
    const joinedBefore = statsByCache()[NAME]?.coalescedWaits ?? 0;
    const patient = settle(getOrComputeWith(cache, key, base, () => 'second fill'));
    await waitFor(() => (statsByCache()[NAME]?.coalescedWaits ?? 0) > joinedBefore, {
      message: 'the patient caller to join the fill',
    });
    controller.abort(reason);
    expect(await leaver).toMatchObject({ ok: false, error: reason });
    gate.resolve('shared');
    expect(await patient).toMatchObject({ ok: true, value: 'shared' });
    expect(await registryEmpties()).toBe(0);
    expect(await getValue(cache, key)).toBe('shared');
  });
});

describe('a caller may abort during the lock wait, Redis adapter', () => {
  it('the wait stops at once, the lock is never taken, no fill runs, registry empty', async () => {
    const key = freshKey('lock-wait');
    const { lock } = redisKeys(prefix, key);
    await direct.set(lock, 'another-replica', 'PX', 10_000);
    const controller = new AbortController();
    const reason = new Error('left during the lock wait');
    const contendedBefore = statsByCache()[NAME]?.lockContended ?? 0;
    let fills = 0;
    const caller = settle(
      getOrComputeWith(
        cache,
        key,
        { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000, signal: controller.signal },
        () => ++fills,
      ),
    );
    // The caller found the other replica's lock and is waiting for it.
    await waitFor(() => (statsByCache()[NAME]?.lockContended ?? 0) > contendedBefore, {
      message: 'the caller to find the lock held and wait',
    });
    const abortedAt = performance.now();
    controller.abort(reason);
    const outcome = await caller;
    expect(outcome).toMatchObject({ ok: false, error: reason });
    expect(performance.now() - abortedAt).toBeLessThan(SLACK);
    expect(await registryEmpties()).toBe(0);
    expect(fills).toBe(0);
    expect(await direct.get(lock)).toBe('another-replica');
    await direct.del(lock);
  });
});
