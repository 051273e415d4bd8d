import { onStampedeEvent, type WarningEvent } from '@stampede/core';
import {
  type RedisServer,
  randomPrefix,
  startRedisServer,
  type Worker,
  waitFor,
} from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache, type RedisCache } from '../src/index.js';
import { herd, startReplicas, stopWorkers, totals } from './helpers.js';

// Redis under memory pressure: a server with `maxmemory 2mb` and `allkeys-lru` (where values live)
// and one with `noeviction` (for locks), both started here, so the eviction policy is ours to set.
let evicting: RedisServer;
let safe: RedisServer;
const clients: Redis[] = [];
const caches: RedisCache[] = [];
const warnings: WarningEvent[] = [];
let stopListening: () => void = () => {};

function connect(url: string): Redis {
  const client = new Redis(url);
  client.on('error', () => {});
  clients.push(client);
  return client;
}

beforeAll(async () => {
  [evicting, safe] = await Promise.all([
    startRedisServer(['--maxmemory', '2mb', '--maxmemory-policy', 'allkeys-lru']),
    startRedisServer(['--maxmemory-policy', 'noeviction']),
  ]);
  stopListening = onStampedeEvent((event) => {
    if (event.type === 'warning') warnings.push(event);
  });
});

afterAll(async () => {
  stopListening();
  await Promise.all(caches.map((cache) => cache.close()));
  for (const client of clients) client.disconnect();
  await Promise.all([evicting?.stop(), safe?.stop()]);
});

const warningsOf = (name: string) => warnings.filter((warning) => warning.cache === name);

/** A cache whose warm-up has been answered (a later command on its connections has been). */
async function warmCache(options: { name: string; url: string; lockUrl?: string }): Promise<RedisCache> {
  const client = connect(options.url);
  const lockClient = options.lockUrl === undefined ? undefined : connect(options.lockUrl);
  const cache = createRedisCache({ client, lockClient, name: options.name, prefix: randomPrefix('evict') });
  caches.push(cache);
  await Promise.all([client.ping(), lockClient?.ping()]);
  return cache;
}

describe('the eviction policy of the lock server is checked once', () => {
  it('warns once, naming the policy and the risk, for allkeys-lru with a maxmemory', async () => {
    const cache = await warmCache({ name: 'evict-warned', url: evicting.url });
    // Used as usual afterwards: still one warning.
    await cache.set(
      'k',
      { value: 1, createdAt: Date.now(), freshUntil: Infinity, staleUntil: Infinity },
      { ttl: 60_000 },
    );
    await cache.get('k');
    const found = warningsOf('evict-warned');
    expect(found).toHaveLength(1);
    expect(found[0]?.message).toMatch(/maxmemory-policy allkeys-lru with maxmemory 2097152/);
    expect(found[0]?.message).toMatch(/evict a fill lock/);
    expect(found[0]?.message).toMatch(/lockClient/);
    // The values live there too: what eviction does to invalidations, in the same warning.
    expect(found[0]?.message).toMatch(
      /tag's invalidation record.*before the values it invalidates.*tombstone/,
    );
  });

  it('does not warn for noeviction', async () => {
    await warmCache({ name: 'evict-safe', url: safe.url });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(warningsOf('evict-safe')).toEqual([]);
  });

  it("warns of the values' server too: with locks on a noeviction one, of invalidations only", async () => {
    // Before: no warning, while allkeys-lru evicted a tag's record (783 of 1,500 invalidated reads
    // served again) or a delete's tombstone (4 of 4 deletes undone).
    await warmCache({ name: 'evict-split', url: evicting.url, lockUrl: safe.url });
    await waitFor(() => warningsOf('evict-split').length > 0, { message: 'the warning' });
    const found = warningsOf('evict-split');
    expect(found).toHaveLength(1);
    expect(found[0]?.message).toMatch(
      /Redis holding the values of cache 'evict-split' has maxmemory-policy allkeys-lru/,
    );
    expect(found[0]?.message).toMatch(
      /tag's invalidation record.*before the values it invalidates.*tombstone/,
    );
    expect(found[0]?.message).not.toMatch(/fill lock/);
  });

  it('warns about the lock server when that is the one that may evict', async () => {
    await warmCache({ name: 'evict-lock-server', url: safe.url, lockUrl: evicting.url });
    const found = warningsOf('evict-lock-server');
    expect(found).toHaveLength(1);
    expect(found[0]?.message).toMatch(/given as lockClient/);
    // The values' server does not evict: nothing about invalidations.
    expect(found[0]?.message).not.toMatch(/tombstone/);
  });

  it('a user that may not run CONFIG is not checked, and nothing is reported', async () => {
    const admin = connect(evicting.url);
    await admin.call('ACL', 'SETUSER', 'noconfig', 'on', '>pw', '~*', '&*', '+@all', '-config');
    const client = connect(evicting.url.replace('redis://', 'redis://noconfig:pw@'));
    const errors: unknown[] = [];
    const off = onStampedeEvent((event) => {
      if (event.type === 'backend-error' && event.cache === 'evict-noconfig') errors.push(event);
    });
    try {
      const cache = createRedisCache({ client, name: 'evict-noconfig', prefix: randomPrefix('evict') });
      caches.push(cache);
      await client.ping();
      expect(warningsOf('evict-noconfig')).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      off();
    }
  });
});

describe('which warning each maxmemory-policy gets', () => {
  // A values' server and a lock server of this describe's own, both with a maxmemory: each case
  // sets their policies (CONFIG SET), then makes a cache, which reads them once as it warms up.
  let values: RedisServer;
  let locks: RedisServer;
  let valuesAdmin: Redis;
  let locksAdmin: Redis;
  let made = 0;

  beforeAll(async () => {
    [values, locks] = await Promise.all([
      startRedisServer(['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction']),
      startRedisServer(['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction']),
    ]);
    valuesAdmin = connect(values.url);
    locksAdmin = connect(locks.url);
  });

  afterAll(async () => {
    await Promise.all([values?.stop(), locks?.stop()]);
  });

  /** The warnings of a cache made after setting the policies (`locks` undefined: no lockClient). */
  async function warningsFor(valuesPolicy: string, locksPolicy?: string): Promise<string[]> {
    await valuesAdmin.config('SET', 'maxmemory-policy', valuesPolicy);
    if (locksPolicy !== undefined) await locksAdmin.config('SET', 'maxmemory-policy', locksPolicy);
    const name = `policy-${++made}`;
    await warmCache({ name, url: values.url, lockUrl: locksPolicy === undefined ? undefined : locks.url });
    // The warm-up's CONFIG GETs were answered before the PINGs; its warning follows in a few ticks.
    await new Promise((resolve) => setTimeout(resolve, 50));
    return warningsOf(name).map((warning) => warning.message);
  }

  const ALLKEYS = ['allkeys-lru', 'allkeys-lfu', 'allkeys-random'];
  const VOLATILE = ['volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl'];

  it('values on an evicting server, locks on a noeviction one: one warning, of what that policy can evict', async () => {
    for (const policy of [...ALLKEYS, ...VOLATILE]) {
      const messages = await warningsFor(policy, 'noeviction');
      expect(messages, policy).toHaveLength(1);
      const [message] = messages as [string];
      expect(message, policy).toMatch(
        new RegExp(
          `Redis holding the values of cache '[^']+' has maxmemory-policy ${policy} with maxmemory 67108864`,
        ),
      );
      expect(message, policy).not.toMatch(/fill lock/);
      // A tombstone has a TTL: every evicting policy can take it.
      expect(message, policy).toMatch(
        /a delete's tombstone \(kept tombstoneTtl.*writes its older value back/,
      );
      expect(message, policy).toMatch(/noeviction \(or no maxmemory\).*headroom/);
      if (ALLKEYS.includes(policy)) {
        // A tag's record has none: only allkeys-* takes it, and volatile-lru/lfu are the way out.
        expect(message, policy).toMatch(
          /tag's invalidation record \(<prefix>\{tag\}:tag, kept without a TTL\)/,
        );
        expect(message, policy).toMatch(/volatile-lru or volatile-lfu never evict tag records/);
      } else {
        expect(message, policy).not.toMatch(/tag/);
      }
      expect(/among the first/.test(message), policy).toBe(policy === 'volatile-ttl');
    }
  });

  it('one server for values and locks: one warning, the lock and the invalidations together', async () => {
    for (const policy of ['allkeys-lru', 'volatile-lru', 'volatile-ttl']) {
      const messages = await warningsFor(policy);
      expect(messages, policy).toHaveLength(1);
      const [message] = messages as [string];
      expect(message, policy).toMatch(
        new RegExp(
          `The Redis of cache '[^']+' has maxmemory-policy ${policy} .*evict a fill lock.*; and it can evict`,
        ),
      );
      expect(message, policy).toMatch(/tombstone/);
      expect(/tag's invalidation record/.test(message), policy).toBe(policy === 'allkeys-lru');
      expect(message, policy).toMatch(/noeviction.*lockClient/);
    }
  });

  it('both servers evicting: one warning naming each, and what each can evict', async () => {
    const messages = await warningsFor('volatile-lfu', 'allkeys-lfu');
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(
      /given as lockClient of cache '[^']+' has maxmemory-policy allkeys-lfu.*fill lock.*The Redis holding its values has maxmemory-policy volatile-lfu.*tombstone.*noeviction on the server holding the locks/,
    );
    expect(messages[0]).not.toMatch(/tag/);
  });

  it('noeviction on both, or no maxmemory: no warning', async () => {
    expect(await warningsFor('noeviction')).toEqual([]);
    expect(await warningsFor('noeviction', 'noeviction')).toEqual([]);
    await valuesAdmin.config('SET', 'maxmemory', '0');
    try {
      expect(await warningsFor('allkeys-lru')).toEqual([]);
    } finally {
      await valuesAdmin.config('SET', 'maxmemory', '64mb');
    }
  });
});

describe('a fleet under memory pressure', () => {
  // Three replica processes, their values on the evicting server; a 3 s fill while another client
  // writes 50 kB values to the same server as fast as it can (tens of times its maxmemory).
  const REPLICAS = 3;
  const CALLERS = 50;
  const FILL_MS = 3_000;
  const options = { ttl: 60_000, distributedFillLock: true, lockTtl: 10_000, lockWaitTimeout: 15_000 };
  let workers: Worker[] = [];

  afterAll(async () => {
    await stopWorkers(workers);
  });

  /** Writes filler keys to the evicting server until `until`; resolves how many it wrote. */
  async function fill(prefix: string, until: number): Promise<number> {
    const writer = connect(evicting.url);
    const payload = 'x'.repeat(50_000);
    let written = 0;
    while (Date.now() < until) {
      await writer.set(`${prefix}filler:${written}`, payload);
      written++;
      if (written % 20 === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return written;
  }

  async function run(label: string, lockUrl: string | undefined) {
    const prefix = randomPrefix(`evict-${label}`);
    const fleet = await startReplicas(REPLICAS, { url: evicting.url, lockUrl, prefix });
    workers.push(...fleet);
    const stats = connect(evicting.url);
    const evictedBefore = Number(/evicted_keys:(\d+)/.exec(await stats.info('stats'))?.[1]);
    const pending = herd(fleet, { key: 'hot', callers: CALLERS, fillMs: FILL_MS, options }, 60_000);
    // The filler stops before the fill ends, so the value the holder writes then is not evicted at once.
    const filler = await fill(prefix, Date.now() + FILL_MS - 500);
    const sum = totals(await pending);
    const evicted = Number(/evicted_keys:(\d+)/.exec(await stats.info('stats'))?.[1]) - evictedBefore;
    await stopWorkers(fleet);
    workers = workers.filter((worker) => !fleet.includes(worker));
    return { ...sum, evicted, filler };
  }

  it('with its locks on a noeviction server (lockClient), runs 1 fill while the value server evicts', async () => {
    const split = await run('split', safe.url);
    console.log(
      `[eviction] locks on a noeviction server: ${split.fills} fill(s), ${split.answered} answered, ${split.evicted} keys evicted by ${split.filler} filler writes, slowest ${split.maxMs} ms`,
    );
    expect(split.evicted).toBeGreaterThan(0);
    expect(split.errors).toEqual([]);
    expect(split.answered).toBe(REPLICAS * CALLERS);
    expect(split.fills).toBe(1);
  });

  it('with its locks on the evicting server, the lock is evicted during the fill and others fill too', async () => {
    const shared = await run('shared', undefined);
    console.log(
      `[eviction] locks on the allkeys-lru server: ${shared.fills} fill(s), ${shared.answered} answered, ${shared.evicted} keys evicted`,
    );
    expect(shared.evicted).toBeGreaterThan(0);
    expect(shared.answered).toBe(REPLICAS * CALLERS);
    // What lockClient is for: the same herd without it fills more than once.
    expect(shared.fills).toBeGreaterThan(1);
  });
});
