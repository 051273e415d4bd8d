import { readFileSync } from 'node:fs';
import {
  createTieredCache,
  getOrComputeWith,
  invalidate,
  invalidateTag,
  onStampedeEvent,
  type StampedeEvent,
  statsByCache,
  type WarningEvent,
} from '@stampede/core';
import { createMemoryCache } from '@stampede/memory';
import { type RedisServer, startRedisServer, waitFor } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache, redisKeys } from '../src/index.js';
import { written } from './helpers.js';

// Redis users with limited permissions (ACL), created on a server started here.
let server: RedisServer;
let admin: Redis;
const clients: Redis[] = [];
const caches: RedisCache[] = [];
const events: StampedeEvent[] = [];
let stopListening: () => void = () => {};

// The line the README gives users to paste (its password placeholder replaced).
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
// Indented there as part of a list item.
const DOCUMENTED = /^ *(ACL SETUSER stampede .*)$/m.exec(README)?.[1];

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
  const users: Record<string, string[]> = {
    noscripts: ['on', '>pw', '~*', '&*', '+@all', '-eval', '-evalsha', '-eval_ro', '-evalsha_ro'],
    nopublish: ['on', '>pw', '~*', '&*', '+@all', '-publish'],
    // What Redis 7 gives a new user by default (acl-pubsub-default resetchannels): no channel at all.
    nochannels: ['on', '>pw', '~*', 'resetchannels', '+@all'],
    // Granted by category: TIME is in none of them (only @fast).
    categories: ['on', '>pw', '~*', '&*', '+@read', '+@write', '+@scripting', '+@pubsub', '+@connection'],
    noexpire: ['on', '>pw', '~*', '&*', '+@all', '-pexpire'],
  };
  for (const [user, rules] of Object.entries(users)) await admin.call('ACL', 'SETUSER', user, ...rules);
  if (DOCUMENTED !== undefined) {
    const [, , ...rules] = DOCUMENTED.replace('>CHANGE-ME', '>pw').split(' ');
    await admin.call('ACL', 'SETUSER', ...(rules as [string, ...string[]]));
    // The line of the release before, without PTTL (the delete and the lock extension use it now).
    const [, , , ...older] = DOCUMENTED.replace('>CHANGE-ME', '>pw').replace(' +pttl', '').split(' ');
    await admin.call('ACL', 'SETUSER', 'stampede-before', ...(older as [string, ...string[]]));
    // The line without one command each: UNSUBSCRIBE, PING.
    for (const command of ['unsubscribe', 'ping']) {
      const [, , , ...without] = DOCUMENTED.replace('>CHANGE-ME', '>pw')
        .replace(` +${command}`, '')
        .split(' ');
      await admin.call('ACL', 'SETUSER', `stampede-no${command}`, ...(without as [string, ...string[]]));
    }
  }
  stopListening = onStampedeEvent((event) => events.push(event));
});

afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await server?.stop();
});

function cacheAs(user: string, name: string, tombstoneTtl?: number): RedisCache {
  const client = new Redis(server.url.replace('redis://', `redis://${user}:pw@`));
  client.on('error', () => {});
  clients.push(client);
  const cache = createRedisCache({ client, name, prefix: 'stampede:', tombstoneTtl });
  caches.push(cache);
  return cache;
}

const warningsOf = (name: string) =>
  events.filter((event): event is WarningEvent => event.type === 'warning' && event.cache === name);
// Every warning of a cache, each named by the first pattern it matches (`?` for none): a test
// compares the whole list, so a wrong or extra warning fails it.
const warningKinds = (name: string, kinds: Record<string, RegExp>) =>
  warningsOf(name).map(
    (warning) => Object.entries(kinds).find(([, pattern]) => pattern.test(warning.message))?.[0] ?? '?',
  );
// The core's own warning when distributedFillLock meets a cache without tryAcquireFillLock.
const CORE_NO_LOCK = /distributedFillLock was asked of cache '[^']+', which has no tryAcquireFillLock/;
const backendErrorsOf = (name: string) =>
  events.filter((event) => event.type === 'backend-error' && event.cache === name);

/** `callers` calls on each cache at once, all for `key`; the slowest caller's time and the fill count. */
async function herdOn(cachesInHerd: RedisCache[], key: string, options: object, callers = 20) {
  let fills = 0;
  const started = performance.now();
  const values = await Promise.all(
    cachesInHerd.flatMap((cache) =>
      Array.from({ length: callers }, () =>
        getOrComputeWith(cache, key, options, async () => {
          fills++;
          await new Promise((resolve) => setTimeout(resolve, 200));
          return cache.name;
        }),
      ),
    ),
  );
  return { fills, values, slowestMs: performance.now() - started };
}

describe('a Redis user without EVAL/EVALSHA', () => {
  it('gets one warning per cache, and a locked herd does not wait out lockWaitTimeout: in-process protection only', async () => {
    // Two replicas, created just before the herd (no time to warm up).
    const replicas = [cacheAs('noscripts', 'acl-noscripts-a'), cacheAs('noscripts', 'acl-noscripts-b')];
    const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000 };
    const first = await herdOn(replicas, 'no-scripts', options);
    const second = await herdOn(replicas, 'no-scripts-again', options);
    console.log(
      `[acl] no scripts: slowest caller ${first.slowestMs.toFixed(0)} ms then ${second.slowestMs.toFixed(0)} ms (fill 200 ms, lockWaitTimeout 5 s), ${first.fills} + ${second.fills} fills`,
    );
    for (const herd of [first, second]) {
      expect(herd.slowestMs).toBeLessThan(2_000);
      // One fill per process, as on a cache without a lock.
      expect(herd.fills).toBe(2);
    }
    for (const cache of replicas) {
      expect(cache.tryAcquireFillLock).toBeUndefined();
      const stats = statsByCache()[cache.name];
      expect(stats).toMatchObject({ lockAcquired: 0, lockContended: 0, lockWaitTimeouts: 0 });
      // Every warning: the refusal alone (it used to come a second time, first as "refused TIME",
      // since the warm-up's clock script met the refused EVALSHA first, and a third time as the
      // core's "no tryAcquireFillLock", which a lock the binding withdrew no longer gets).
      expect(warningKinds(cache.name, { script: /refused a script/, core: CORE_NO_LOCK })).toEqual([
        'script',
      ]);
      const scriptWarnings = warningsOf(cache.name).filter((w) => /refused a script/.test(w.message));
      expect(scriptWarnings).toHaveLength(1);
      expect(scriptWarnings[0]?.message).toMatch(/NOPERM.*eval/);
      expect(scriptWarnings[0]?.message).toMatch(/in-process only/);
      expect(scriptWarnings[0]?.message).toMatch(/Running Redis for stampede/);
    }
  });
});

describe('a Redis whose EVAL and EVALSHA are disabled by rename-command (a hardened or managed server)', () => {
  it('warns once per cache as for a refused script, herds run in-process, and no event echoes a value', async () => {
    // Before: only backend-error events, and the server's reply echoes the command's first
    // arguments (`with args beginning with: '<sha>' '1' '<key>' '<envelope...>'`): the value's start.
    const renamed = await startRedisServer([
      '--rename-command',
      'EVAL',
      '',
      '--rename-command',
      'EVALSHA',
      '',
    ]);
    try {
      const replicas = ['renamed-a', 'renamed-b'].map((name) => {
        const client = new Redis(renamed.url);
        client.on('error', () => {});
        clients.push(client);
        const cache = createRedisCache({ client, name, prefix: 'stampede:' });
        caches.push(cache);
        return cache;
      });
      const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: 5_000 };
      for (const key of ['renamed-1', 'renamed-2']) {
        const herd = await herdOn(replicas, key, options);
        expect(herd.slowestMs).toBeLessThan(2_000);
        expect(herd.fills).toBe(2);
      }
      for (const cache of replicas) {
        expect(cache.tryAcquireFillLock).toBeUndefined();
        expect(warningKinds(cache.name, { script: /refused a script/, core: CORE_NO_LOCK })).toEqual([
          'script',
        ]);
        const scriptWarnings = warningsOf(cache.name).filter((w) => /refused a script/.test(w.message));
        expect(scriptWarnings).toHaveLength(1);
        expect(scriptWarnings[0]?.message).toMatch(
          /unknown command 'evalsha', with args beginning with: \[redacted\]/,
        );
        expect(scriptWarnings[0]?.message).toMatch(/rename-command/);
        const faults = backendErrorsOf(cache.name);
        expect(faults.length).toBeGreaterThan(0);
        for (const fault of faults) {
          const text = JSON.stringify({
            message: (fault as { error: Error }).error.message,
            stack: (fault as { error: Error }).error.stack,
          });
          expect(text).not.toMatch(/s2\||renamed-[ab]/);
        }
      }
    } finally {
      await renamed.stop();
    }
  });
});

describe('a Redis user without PUBLISH', () => {
  it('warns once per cache; the lock is still released and later releases do not announce (nor fail)', async () => {
    const replicas = [cacheAs('nopublish', 'acl-nopublish-a'), cacheAs('nopublish', 'acl-nopublish-b')];
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 100 };
    const keys = ['no-publish-1', 'no-publish-2', 'no-publish-3', 'no-publish-4'];
    let fills = 0;
    for (const key of keys) fills += (await herdOn(replicas, key, options)).fills;
    // One fill per herd: the lock works without its announcement (the waiter polls).
    expect(fills).toBe(keys.length);
    for (const cache of replicas) {
      const warned = warningsOf(cache.name);
      // A cache that released a lock was refused once, then stopped announcing.
      expect(warned).toHaveLength((statsByCache()[cache.name]?.lockAcquired ?? 0) > 0 ? 1 : 0);
      for (const warning of warned) {
        expect(warning.message).toMatch(/refused to PUBLISH/);
        expect(warning.message).toMatch(/poll/);
      }
      // The refused release is retried without the announcement: nothing to report.
      expect(backendErrorsOf(cache.name)).toEqual([]);
      // Scripting is untouched: the lock is still offered.
      expect(typeof cache.tryAcquireFillLock).toBe('function');
    }
    for (const key of keys) expect(await admin.exists(redisKeys('stampede:', key).lock)).toBe(0);
  });
});

describe('a Redis user granted by category (+@read +@write +@scripting +@pubsub): no TIME', () => {
  it('one warning about TIME per cache; scripts, the lock, deletes and tag invalidations still work', async () => {
    const replicas = [cacheAs('categories', 'acl-categories-a'), cacheAs('categories', 'acl-categories-b')];
    const options = { ttl: 60_000, distributedFillLock: true };
    const herd = await herdOn(replicas, 'by-category', options);
    expect(herd.fills).toBe(1);
    const [a, b] = replicas as [RedisCache, RedisCache];
    expect(a.tryAcquireFillLock).toBeDefined();
    // A delete (a tombstone on the replica's own clock) is seen by the other replica.
    await written(a, b);
    await invalidate(a, 'by-category');
    let refills = 0;
    await getOrComputeWith(b, 'by-category', options, () => ++refills);
    expect(refills).toBe(1);
    // So is a tag invalidation.
    const tagged = { ttl: 60_000, tags: ['t-categories'] };
    await getOrComputeWith(a, 'tagged', tagged, () => 'old');
    await written(a, b);
    await invalidateTag(a, 't-categories');
    expect(await getOrComputeWith(b, 'tagged', tagged, () => 'new')).toBe('new');
    for (const cache of replicas) {
      const messages = warningsOf(cache.name).map((w) => w.message);
      expect(warningKinds(cache.name, { time: /refused TIME/ })).toEqual(['time']);
      expect(messages.filter((m) => /refused TIME/.test(m))).toHaveLength(1);
      expect(messages.find((m) => /refused TIME/.test(m))).toMatch(/own clock.*\+time/);
      expect(messages.filter((m) => /refused a script/.test(m))).toEqual([]);
    }
  });
});

describe('a Redis user without PEXPIRE', () => {
  it('one warning when a fill lock cannot be extended; values are still stored and the lock still taken', async () => {
    const replicas = [cacheAs('noexpire', 'acl-noexpire-a'), cacheAs('noexpire', 'acl-noexpire-b')];
    const [a, b] = replicas as [RedisCache, RedisCache];
    // A fill longer than lockTtl: the core extends the lock halfway through, and Redis refuses.
    const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 200, lockWaitTimeout: 5_000 };
    await getOrComputeWith(a, 'long', options, async () => {
      await new Promise((resolve) => setTimeout(resolve, 350));
      return 'slow';
    });
    // The lock lapsed mid-fill (not extended): only the written value keeps b from filling.
    await written(a);
    let fills = 0;
    expect(await getOrComputeWith(b, 'long', options, () => ++fills)).toBe('slow');
    expect(fills).toBe(0);
    expect(a.tryAcquireFillLock).toBeDefined();
    const messages = warningsOf(a.name).map((w) => w.message);
    // The refusal, then the core's word that the lock lapsed under the fill (it was not extended).
    expect(
      warningKinds(a.name, {
        extend: /refused to extend a fill lock/,
        lost: /fill lock for 'long' was lost/,
      }),
    ).toEqual(['extend', 'lost']);
    expect(warningKinds(b.name, {})).toEqual([]);
    expect(messages.filter((m) => /refused to extend a fill lock/.test(m))).toHaveLength(1);
    expect(messages.find((m) => /refused to extend/.test(m))).toMatch(/NOPERM|can't run.*\+pexpire/);
    expect(messages.filter((m) => /refused a script/.test(m))).toEqual([]);
  });
});

describe('a Redis user without channels (the default for a new user on Redis 7)', () => {
  it('warns once per cache for the refused SUBSCRIBE and once for the bus PUBLISH: push wake-up and tiered coherence are gone', async () => {
    const [a, b] = [cacheAs('nochannels', 'acl-nochannels-a'), cacheAs('nochannels', 'acl-nochannels-b')];
    // The lock still holds the herd to one fill (waiters poll).
    const herd = await herdOn([a, b], 'no-channels', { ttl: 60_000, distributedFillLock: true });
    expect(herd.fills).toBe(1);
    const [tieredA, tieredB] = [a, b].map((remote) =>
      createTieredCache({ local: createMemoryCache(), remote, name: `tiered-${remote.name}` }),
    ) as [ReturnType<typeof createTieredCache>, ReturnType<typeof createTieredCache>];
    let version = 0;
    const read = (cache: typeof tieredA) =>
      getOrComputeWith(cache, 'bus-key', { ttl: 60_000 }, () => ++version);
    expect([await read(tieredA), await read(tieredB)]).toEqual([1, 1]);
    await written(tieredA, tieredB);
    // B's local copy is not invalidated: the bus could not carry A's delete, and A's call says so.
    await expect(invalidate(tieredA, 'bus-key')).rejects.toMatchObject({
      name: 'CacheBusError',
      code: 'E_STAMPEDE_BUS_UNHEARD',
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await read(tieredB)).toBe(1);
    for (const cache of [a, b]) {
      const subscribe = warningsOf(cache.name).filter((w) => /refused to SUBSCRIBE/.test(w.message));
      expect(subscribe).toHaveLength(1);
      expect(subscribe[0]?.message).toMatch(/NOPERM.*they poll.*localTtl.*&<prefix>\*/);
    }
    const busPublish = warningsOf(a.name).filter((w) => /PUBLISH on the invalidation bus/.test(w.message));
    expect(busPublish).toHaveLength(1);
    expect(busPublish[0]?.message).toMatch(/NOPERM.*localTtl/);
    // Used on: still one warning of each kind.
    await expect(invalidate(tieredA, 'bus-key')).rejects.toMatchObject({ code: 'E_STAMPEDE_BUS_UNHEARD' });
    await herdOn([a, b], 'no-channels-again', { ttl: 60_000, distributedFillLock: true });
    expect(warningsOf(a.name).filter((w) => /SUBSCRIBE|invalidation bus/.test(w.message))).toHaveLength(2);
    await Promise.all([tieredA.close(), tieredB.close()]);
    // Every warning, once each: a lock holder's announcements are refused too (the fill's end).
    for (const cache of [a, b]) {
      const kinds = warningKinds(cache.name, {
        subscribe: /refused to SUBSCRIBE/,
        bus: /PUBLISH on the invalidation bus/,
        announce: /refused to PUBLISH the end of a fill/,
      });
      const held = (statsByCache()[cache.name]?.lockAcquired ?? 0) > 0;
      expect(kinds.sort()).toEqual(
        [...(held ? ['announce'] : []), ...(cache === a ? ['bus'] : []), 'subscribe'].sort(),
      );
    }
  });
});

/**
 * A delete on `deleter` while `holder` runs a locked fill of `key` that started before it and lasts
 * `fillMs` (lockTtl 300 ms, extended by the core as the fill runs): what `deleter` reads afterwards.
 */
async function deleteDuringLockedFill(holder: RedisCache, deleter: RedisCache, key: string, fillMs: number) {
  let filling = false;
  const fill = getOrComputeWith(
    holder,
    key,
    { ttl: 60_000, distributedFillLock: true, lockTtl: 300 },
    async () => {
      filling = true;
      await new Promise((resolve) => setTimeout(resolve, fillMs));
      return 'older';
    },
  );
  while (!filling) await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve) => setTimeout(resolve, 50));
  await invalidate(deleter, key);
  expect(await fill).toBe('older');
  await written(holder);
  return (await deleter.get(key))?.value;
}

describe("the README's ACL line", () => {
  it('is there, and is all a fleet needs: no warning, no fault, one fill, push wake-up and delete work', async () => {
    expect(DOCUMENTED).toBeDefined();
    const replicas = [cacheAs('stampede', 'acl-documented-a'), cacheAs('stampede', 'acl-documented-b')];
    // A 5 s poll interval: the waiter answering well before it shows the announcement arrived.
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 5_000 };
    const herd = await herdOn(replicas, 'documented', options);
    expect(herd.fills).toBe(1);
    expect(herd.slowestMs).toBeLessThan(2_000);
    await replicas[0]?.delete('documented');
    expect(await replicas[1]?.get('documented')).toBeUndefined();
    for (const cache of replicas) {
      expect(warningsOf(cache.name)).toEqual([]);
      expect(backendErrorsOf(cache.name)).toEqual([]);
    }
  });

  it("keeps a delete made during another replica's locked fill that outlives tombstoneTtl (the tombstone lives as long as the lock)", async () => {
    const [a, b] = [cacheAs('stampede', 'acl-pttl-a', 200), cacheAs('stampede', 'acl-pttl-b', 200)];
    // A 1 s fill, a 200 ms tombstone: only the lock's TTL, read with PTTL, keeps the tombstone.
    expect(await deleteDuringLockedFill(a, b, 'pttl-kept', 1_000)).toBeUndefined();
    for (const cache of [a, b]) {
      expect(warningsOf(cache.name)).toEqual([]);
      expect(backendErrorsOf(cache.name)).toEqual([]);
    }
  });
});

describe('the ACL line of the release before (no PTTL)', () => {
  it('still deletes, extends and fills once, and says once per cache that a delete during a locked fill may be undone', async () => {
    // Before: the scripts' pcall('PTTL') swallowed the refusal: the delete was undone (3 of 3) and
    // nothing said so.
    const [a, b] = [
      cacheAs('stampede-before', 'acl-before-a', 200),
      cacheAs('stampede-before', 'acl-before-b', 200),
    ];
    const undone = await deleteDuringLockedFill(a, b, 'before', 1_000);
    // The tombstone lived its plain 200 ms: the fill that started before the delete wrote its value.
    expect(undone).toBe('older');
    // Used on: still one warning each.
    expect(await deleteDuringLockedFill(a, b, 'before-again', 500)).toBe('older');
    // The deleter meets the refusal in its delete, the holder in the lock's extension (a tombstone is there).
    for (const cache of [a, b]) {
      expect(warningKinds(cache.name, { pttl: /refused PTTL/ })).toEqual(['pttl']);
      expect(warningsOf(cache.name)[0]?.message).toMatch(/tombstoneTtl.*undoing the delete.*\+pttl/);
      expect(backendErrorsOf(cache.name)).toEqual([]);
      expect(cache.tryAcquireFillLock).toBeDefined();
    }
  });
});

describe('the ACL line without UNSUBSCRIBE', () => {
  it('closing a tiered cache (which leaves the bus) gives no SUBSCRIBE warning: nothing stopped hearing', async () => {
    // Before: the refused UNSUBSCRIBE was reported as a refused SUBSCRIBE ("Lock waiters are not woken").
    const remote = cacheAs('stampede-nounsubscribe', 'acl-nounsubscribe');
    const tiered = createTieredCache({
      local: createMemoryCache(),
      remote,
      name: 'acl-nounsubscribe-tiered',
    });
    expect(await getOrComputeWith(tiered, 'k', { ttl: 60_000 }, () => 1)).toBe(1);
    await tiered.close();
    // The UNSUBSCRIBE was answered (refused): a fault, counted.
    await waitFor(() => backendErrorsOf(remote.name).length > 0, { message: 'the refused UNSUBSCRIBE' });
    expect(warningsOf(remote.name)).toEqual([]);
    // Push wake-up still works: a herd's loser is woken by the announcement, not a 5 s poll.
    const other = cacheAs('stampede-nounsubscribe', 'acl-nounsubscribe-b');
    const herd = await herdOn([remote, other], 'after-close', {
      ttl: 60_000,
      distributedFillLock: true,
      lockPollInterval: 5_000,
    });
    expect(herd.fills).toBe(1);
    expect(herd.slowestMs).toBeLessThan(2_000);
    expect(warningsOf(remote.name)).toEqual([]);
    expect(warningsOf(other.name)).toEqual([]);
  });
});

describe('the ACL line without PING', () => {
  it("a key's channel, once subscribed, is known to be heard (hearsFillDone), with no warning", async () => {
    // Before: the subscriber's PING after it connected was refused, and hearsFillDone stayed false:
    // every woken loser paid a round trip more, silently.
    const cache = cacheAs('stampede-noping', 'acl-noping');
    let ready = false;
    const stop = cache.onFillDone(
      'pinged',
      () => {},
      () => {
        ready = true;
      },
    );
    try {
      await waitFor(() => ready, { message: 'the SUBSCRIBE acknowledged' });
      await waitFor(() => cache.hearsFillDone('pinged'), { timeout: 2_000, message: 'hearsFillDone' });
    } finally {
      stop();
    }
    expect(warningsOf(cache.name)).toEqual([]);
    expect(backendErrorsOf(cache.name)).toEqual([]);
  });
});
