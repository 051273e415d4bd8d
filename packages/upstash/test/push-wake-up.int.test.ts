import { type FillOutcome, getOrComputeWith, resetStats, stats } from '@stampede/core';
import { deferred, testRedis, waitFor } from '@stampede/test-support';
import type { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createUpstashCache, type UpstashCache, type UpstashClient, upstashKeys } from '../src/index.js';
import { type ClientMode, type Harness, startHarness, upstashClient } from './harness.js';

let h: Harness;
/** Straight to Redis, for what the REST API does not offer (PUBSUB). */
let direct: IORedis;
beforeAll(async () => {
  h = await startHarness('upstash-push');
  direct = new IORedis((await testRedis()).url);
});
afterAll(async () => {
  direct?.disconnect();
  await h?.stop();
});
beforeEach(() => {
  resetStats();
});

/**
 * Far longer than any test here may run: a loser that gets the value has been woken by the push
 * notice (or its `ready` read), never by a poll.
 */
const NO_POLL = { lockPollInterval: 120_000, lockWaitTimeout: 120_000 };

/** Waits (at most 5 s) for `check`; the failure names `what`. */
function until(what: string, check: () => boolean | Promise<boolean>): Promise<unknown> {
  return waitFor(check, { timeout: 5_000, interval: 10, message: what });
}

async function redisSubscribers(channel: string): Promise<number> {
  const reply = (await direct.pubsub('NUMSUB', channel)) as [string, number];
  return Number(reply[1]);
}

/** Two instances on one prefix, each with its own client: two replicas. */
function replicas(mode: ClientMode = {}): [UpstashCache, UpstashCache] {
  const prefix = h.nextPrefix();
  return [
    createUpstashCache({ client: h.client(mode), prefix }),
    createUpstashCache({ client: h.client(mode), prefix }),
  ];
}

/**
 * `loser` as a cache that tells when its subscription was acknowledged (`ready`) and how many reads
 * it completed after that moment.
 */
function watched(loser: UpstashCache) {
  const seen = { ready: false, readsAfterReady: 0 };
  const cache: UpstashCache = {
    ...loser,
    async get(key) {
      const afterReady = seen.ready;
      const entry = await loser.get(key);
      if (afterReady) seen.readsAfterReady++;
      return entry;
    },
    onFillDone: (key, listener, ready) =>
      loser.onFillDone(key, listener, () => {
        seen.ready = true;
        ready?.();
      }),
  };
  return { cache, seen };
}

/**
 * `holder` takes the lock on `key` and fills until the loser has subscribed and made the read its
 * acknowledgement triggers (a miss); `loser` waits on the lock with polls too far apart to matter,
 * so only the holder's announcement can hand it the value.
 */
async function loserWokenByHolder(holder: UpstashCache, loser: UpstashCache, key: string) {
  const gate = deferred<void>();
  const options = { ttl: 60_000, distributedFillLock: true, ...NO_POLL };
  let fills = 0;
  const fill = async (value: string) => {
    fills++;
    await gate.promise;
    return value;
  };
  const holding = getOrComputeWith(holder, key, options, () => fill('from the holder'));
  await until('the holder to take the lock', () => stats().lockAcquired === 1);
  const opened = h.server.stats().subscriptions;
  const { cache, seen } = watched(loser);
  const waiting = getOrComputeWith(cache, key, options, () => fill('from the loser'));
  await until('the loser to subscribe and read once', () => seen.readsAfterReady === 1);
  expect(stats().lockContended).toBe(1);
  expect(h.server.stats().subscriptions - opened).toBe(1);
  expect(h.server.subscriptionCount()).toBe(1);
  gate.resolve();
  expect(await holding).toBe('from the holder');
  expect(await waiting).toBe('from the holder');
  expect(fills).toBe(1);
  expect(stats().lockWaitHits).toBe(1);
  // Woken by the announcement, which carries the holder's value (the commit's): no more read.
  expect(seen.readsAfterReady).toBe(1);
  // The wait has ended: its subscription is closed.
  await until('the server to drop the subscription', () => h.server.subscriptionCount() === 0);
}

describe.each([
  { automaticDeserialization: true },
  { automaticDeserialization: false, autoPipelining: false },
])('push wake-up, %o', (mode) => {
  it("wakes a lock loser on the holder's release, long before its first poll", async () => {
    const [holder, loser] = replicas(mode);
    await loserWokenByHolder(holder, loser, 'hot');
  });

  it('reaches the exact channel of a key with URL characters in it', async () => {
    const [holder, loser] = replicas(mode);
    await loserWokenByHolder(holder, loser, 'a{b}c/d?e=1#f%7B g%');
  });

  // The client splits a stream's `message,<channel>,<message>` at its first two commas.
  it('wakes a loser on a key with commas in it', async () => {
    const [holder, loser] = replicas(mode);
    await loserWokenByHolder(holder, loser, 'a,b,,c');
  });

  it('calls ready once the subscription is acknowledged, then hears each outcome until stopped', async () => {
    const [holder, listener] = replicas(mode);
    const { channel } = upstashKeys(listener.prefix, 'k');
    const heard: FillOutcome[] = [];
    // How many Redis subscribers the channel had when `ready` was called.
    let subscribersAtReady: Promise<number> | undefined;
    const stop = listener.onFillDone(
      'k',
      (outcome) => heard.push(outcome),
      () => {
        subscribersAtReady = redisSubscribers(channel);
      },
    );
    await until('ready', () => subscribersAtReady !== undefined);
    expect(await subscribersAtReady).toBe(1);
    expect(h.server.subscriptionCount()).toBe(1);

    for (const outcome of ['filled', 'failed'] as const) {
      const lock = await holder.tryAcquireFillLock?.('k', 5_000);
      expect(lock).toBeDefined();
      await lock?.release(outcome);
      await until(`the ${outcome} notice`, () => heard.at(-1) === outcome);
    }
    expect(heard).toEqual(['filled', 'failed']);

    stop();
    await until('the server to drop the subscription', () => h.server.subscriptionCount() === 0);
    await until('Redis to drop the subscriber', async () => (await redisSubscribers(channel)) === 0);
    const lock = await holder.tryAcquireFillLock?.('k', 5_000);
    await lock?.release('filled');
    stop();
    expect(heard).toEqual(['filled', 'failed']);
  });
});

describe('messages the stream could cut (it is split into lines at each LF)', () => {
  const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 50, lockWaitTimeout: 10_000 };

  /** `holder` fills `key` (150 ms) while `loser` waits on the lock: the loser's answer. */
  async function loserAnswer(holder: UpstashCache, loser: UpstashCache, key: string, value: unknown) {
    const holding = getOrComputeWith(holder, key, options, async () => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      return value;
    });
    await until('the holder to take the lock', () => stats().lockAcquired === 1);
    const waiting = getOrComputeWith(loser, key, options, () => 'from the loser');
    expect(await holding).toEqual(value);
    return waiting;
  }

  it('a value whose stored text has line breaks (a line-based serializer) reaches the loser whole', async () => {
    const lines = {
      stringify: (value: unknown) =>
        Object.entries(value as Record<string, string>)
          .map(([k, v]) => `${k}=${v}`)
          .join('\r\n'),
      parse: (text: string) => Object.fromEntries(text.split('\r\n').map((line) => line.split('='))),
    };
    const prefix = h.nextPrefix();
    const [holder, loser] = [1, 2].map(() =>
      createUpstashCache({ client: h.client(), prefix, serializer: lines }),
    );
    const value = { a: 'x', b: 'y', c: 'z' };
    expect(await loserAnswer(holder as UpstashCache, loser as UpstashCache, 'k', value)).toEqual(value);
    expect(stats().lockWaitHits).toBe(1);
  });

  it('a key with a line break: the loser opens no stream and polls for the value', async () => {
    const [holder, loser] = replicas();
    const opened = h.server.stats().subscriptions;
    expect(await loserAnswer(holder, loser, 'new\nline', 'from the holder')).toBe('from the holder');
    expect(h.server.stats().subscriptions).toBe(opened);
  });
});

describe('one subscription per waiting call', () => {
  it('opens one stream for each call and closes it with that call’s stop, even on one key', async () => {
    const cache = createUpstashCache({ client: h.client(), prefix: h.nextPrefix() });
    const opened = h.server.stats().subscriptions;
    const ready: number[] = [];
    const stops = [1, 2].map((n) =>
      cache.onFillDone(
        'same',
        () => {},
        () => ready.push(n),
      ),
    );
    await until('both acknowledgements', () => ready.length === 2);
    expect(h.server.stats().subscriptions - opened).toBe(2);
    expect(h.server.subscriptionCount()).toBe(2);
    stops[0]?.();
    await until('the first stream to close', () => h.server.subscriptionCount() === 1);
    stops[1]?.();
    await until('the second stream to close', () => h.server.subscriptionCount() === 0);
  });
});

describe('without push', () => {
  /** A loser that can only poll (every 20 ms) still gets the holder's value. */
  async function pollingLoser(holder: UpstashCache, loser: UpstashCache): Promise<void> {
    const gate = deferred<void>();
    const options = { ttl: 60_000, distributedFillLock: true, lockPollInterval: 20 };
    const holding = getOrComputeWith(holder, 'k', options, async () => {
      await gate.promise;
      return 'from the holder';
    });
    await until('the holder to take the lock', () => stats().lockAcquired === 1);
    const waiting = getOrComputeWith(loser, 'k', options, () => 'from the loser');
    await until('the loser to contend', () => stats().lockContended === 1);
    gate.resolve();
    expect(await holding).toBe('from the holder');
    expect(await waiting).toBe('from the holder');
    expect(stats().lockWaitHits).toBe(1);
  }

  it('pushWakeUp: false never subscribes; the loser polls', async () => {
    const prefix = h.nextPrefix();
    const holder = createUpstashCache({ client: h.client(), prefix });
    const loser = createUpstashCache({ client: h.client(), prefix, pushWakeUp: false });
    const opened = h.server.stats().subscriptions;
    let readyCalled = false;
    loser.onFillDone(
      'k',
      () => {},
      () => {
        readyCalled = true;
      },
    )();
    await pollingLoser(holder, loser);
    expect(h.server.stats().subscriptions).toBe(opened);
    expect(readyCalled).toBe(false);
  });

  it('a client without subscribe (before @upstash/redis 1.35): the loser polls', async () => {
    const prefix = h.nextPrefix();
    const full = h.client();
    const older: UpstashClient = {
      get: full.get.bind(full),
      set: full.set.bind(full),
      eval: full.eval.bind(full),
      evalsha: full.evalsha.bind(full),
    } as UpstashClient;
    const opened = h.server.stats().subscriptions;
    await pollingLoser(
      createUpstashCache({ client: h.client(), prefix }),
      createUpstashCache({ client: older, prefix }),
    );
    expect(h.server.stats().subscriptions).toBe(opened);
  });

  it('a subscription that fails (the server refuses it): the loser polls, nothing is left open', async () => {
    const prefix = h.nextPrefix();
    const good = h.client();
    // Commands go through a working client; `subscribe` through one with a wrong token (401).
    const refused = upstashClient(h.server.url, 'wrong');
    const client = Object.assign(Object.create(good) as Redis, {
      subscribe: refused.subscribe.bind(refused),
    });
    const loser = createUpstashCache({ client, prefix });
    const opened = h.server.stats().subscriptions;
    let readyCalled = false;
    const stop = loser.onFillDone(
      'k',
      () => {},
      () => {
        readyCalled = true;
      },
    );
    const requests = h.server.stats().requests;
    await until('the refused subscribe request', () => h.server.stats().requests > requests);
    stop();
    await pollingLoser(createUpstashCache({ client: good, prefix }), loser);
    expect(readyCalled).toBe(false);
    // Refused before the route: no stream was ever opened.
    expect(h.server.stats().subscriptions).toBe(opened);
    expect(h.server.subscriptionCount()).toBe(0);
  });
});
