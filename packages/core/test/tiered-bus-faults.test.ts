// A tiered cache whose invalidation bus fails: a replica that has lost its subscription, a fill that
// spans a loss or a recovery, a publish that fails. Each replica is a tiered cache on the shared
// fake `RemoteStore`; `drop` / `restore` cut one replica's subscriber connection as
// `CLIENT KILL TYPE pubsub` does.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type Cache,
  CacheBusError,
  createTieredCache,
  getOrComputeWith,
  getValue,
  inFlightCount,
  invalidate,
  invalidateTag,
  isCacheBusError,
  onStampedeEvent,
  resetStats,
  setValue,
  stats,
  statsByCache,
} from '../src/index.js';
import { BUS_ACK_TIMEOUT_MS, BUS_ERROR_CODE } from '../src/tiered.js';
import { flush } from './helpers.js';
import { localCache, RemoteStore, remoteCache } from './tiered-fixtures.js';

let names = 0;
function replica(store: RemoteStore, localTtl = 60_000) {
  const local = localCache();
  const remote = remoteCache(store, { tags: true });
  const name = `tiered-bus-${++names}`;
  const cache = createTieredCache({ local, remote, name, localTtl });
  return { cache, local, remote, name, counters: () => statsByCache()[name] };
}

async function settled(cache: Cache): Promise<void> {
  for (let i = 0; i < 100 && inFlightCount(cache) !== 0; i++) await flush();
  expect(inFlightCount(cache)).toBe(0);
}

const tagged = { ttl: 60_000, tags: ['group'] };

/** Two replicas on one store that counts bus receivers; with `written`, `k` set to it by `a`. */
async function twoReplicas(written?: string) {
  const store = new RemoteStore();
  store.countsReceivers = true;
  const [a, b] = [replica(store), replica(store)];
  if (written !== undefined) {
    await setValue(a.cache, 'k', written, tagged);
    vi.advanceTimersByTime(1);
  }
  return { store, a, b };
}
// Another replica's change of 'k' (which carries the tag 'group'), as a list.
const changes = [
  { name: 'invalidate', run: (cache: Cache) => invalidate(cache, 'k') },
  { name: 'invalidateTag', run: (cache: Cache) => invalidateTag(cache, 'group') },
  { name: 'setValue', run: (cache: Cache) => setValue(cache, 'k', 'new', tagged) },
];

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a replica that knows its bus is lost', () => {
  it.each(changes)(
    "serves no L1 copy once another replica's $name has resolved: it asks the remote until the bus is back",
    async ({ run }) => {
      const { store, a, b } = await twoReplicas('old');
      expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'unused')).toBe('old');
      expect(b.local.get('k')?.value).toBe('old'); // b holds an L1 copy
      store.drop(b.remote);
      await run(a.cache); // b is not among the receivers: nothing to wait for
      vi.advanceTimersByTime(1);
      // Both read paths: the core's hit path (getOrCompute) and the tiered cache's own get.
      const fresh = await getOrComputeWith(b.cache, 'k', tagged, () => 'new');
      expect(fresh).toBe('new');
      expect(await getValue(b.cache, 'k')).toBe('new');
      expect(b.counters()?.l1Hits).toBe(0);
    },
  );

  it('answers with its L1 copy when the remote fails too (L2 down: fresh copies, SWR, fail-safe)', async () => {
    const store = new RemoteStore();
    const b = replica(store);
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'v')).toBe('v');
    await settled(b.cache);
    vi.advanceTimersByTime(1);
    store.drop(b.remote);
    store.down = true; // a Redis that stops: the subscriber and the data connection both drop
    let fills = 0;
    expect(
      await getOrComputeWith(b.cache, 'k', tagged, () => {
        fills++;
        return 'refilled';
      }),
    ).toBe('v');
    expect(fills).toBe(0);
    expect(b.counters()?.l1Hits).toBe(0); // answered by neither tier: the copy, as the fallback
  });

  it("reads L1 on the core's hit path again once the bus is back, even when its state was made while it was lost", async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    store.drop(b.remote); // before b's first getOrCompute: the core's state is made while deaf
    await setValue(a.cache, 'k', 'v', tagged);
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'unused')).toBe('v');
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'unused')).toBe('v');
    expect(b.counters()?.l1Hits).toBe(0);
    store.restore(b.remote); // L1 cleared
    vi.advanceTimersByTime(1);
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'unused')).toBe('v'); // L2, kept in L1
    const reads = b.remote.calls.get;
    const hit = getOrComputeWith(b.cache, 'k', tagged, () => 'unused');
    expect(b.remote.calls.get).toBe(reads); // answered synchronously from L1, no remote command
    expect(await hit).toBe('v');
    expect(b.counters()?.l1Hits).toBe(1);
    expect(b.counters()?.busRecoveries).toBe(1);
  });
});

/** A fill of 'k' (tagged) on `cache` that ends when `finish` is called. */
function heldFill(cache: Cache): { slow: Promise<unknown>; finish: (value: string) => void } {
  let finish!: (value: string) => void;
  const slow = getOrComputeWith(
    cache,
    'k',
    tagged,
    () =>
      new Promise<string>((resolve) => {
        finish = resolve;
      }),
  );
  return { slow, finish: (value) => finish(value) };
}

describe('a fill that spans a bus loss or recovery', () => {
  it("writes the remote but keeps no L1 copy: another replica's tag invalidation it missed holds", async () => {
    const { store, a, b } = await twoReplicas();
    const { slow, finish } = heldFill(b.cache);
    await flush();
    vi.advanceTimersByTime(1);
    store.drop(b.remote);
    await invalidateTag(a.cache, 'group'); // b does not hear it
    vi.advanceTimersByTime(1);
    store.restore(b.remote); // L1 cleared, as after every recovery
    vi.advanceTimersByTime(1);
    finish('old'); // read from the source before the invalidation
    expect(await slow).toBe('old'); // its caller came before the invalidation
    await settled(b.cache);
    const writes = b.remote.calls.set;
    expect(writes).toBe(1); // the remote took it (and reads it as invalidated)
    expect(b.local.get('k')).toBeUndefined();
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'new')).toBe('new');
    expect(await getValue(a.cache, 'k')).toBe('new');
  });

  it('a fill begun while the bus is lost keeps no L1 copy when its write lands after the recovery', async () => {
    const store = new RemoteStore();
    const b = replica(store);
    store.drop(b.remote);
    vi.advanceTimersByTime(1);
    const { slow, finish } = heldFill(b.cache);
    await flush();
    vi.advanceTimersByTime(1);
    store.restore(b.remote);
    vi.advanceTimersByTime(1);
    finish('v');
    expect(await slow).toBe('v');
    await settled(b.cache);
    expect(b.local.get('k')).toBeUndefined();
    // A fill begun after the recovery is kept as usual.
    vi.advanceTimersByTime(1);
    await invalidate(b.cache, 'k');
    vi.advanceTimersByTime(1);
    expect(await getOrComputeWith(b.cache, 'k', tagged, () => 'w')).toBe('w');
    await settled(b.cache);
    expect(b.local.get('k')?.value).toBe('w');
  });

  it('a read or write of the remote in flight when the bus is lost keeps no L1 copy', async () => {
    const store = new RemoteStore();
    const [a, b] = [replica(store), replica(store)];
    await setValue(a.cache, 'r', 'old', tagged);
    vi.advanceTimersByTime(1);
    b.remote.holdReads = true;
    const read = getValue(b.cache, 'r');
    b.remote.holdWrites = true;
    const write = setValue(b.cache, 'w', 'mine', tagged);
    await flush();
    store.drop(b.remote);
    b.remote.releaseReads();
    b.remote.releaseWrites();
    expect(await read).toBe('old');
    await write;
    // Not even as the fallback kept while the bus is lost: they may predate a change it missed.
    expect(b.local.get('r')).toBeUndefined();
    expect(b.local.get('w')).toBeUndefined();
    // What is read while the bus is lost is kept (the fallback should the remote fail), not served.
    expect(await getValue(b.cache, 'r')).toBe('old');
    expect(b.local.get('r')?.value).toBe('old');
    store.restore(b.remote);
    expect(b.local.get('r')).toBeUndefined();
  });
});

describe('a change whose bus message cannot be published', () => {
  it.each(changes)(
    '$name rejects with CacheBusError once the remote took it, and counts the failed publish',
    async ({ run }) => {
      const { store, a, b } = await twoReplicas('old');
      expect(await getValue(b.cache, 'k')).toBe('old');
      store.publishFails = true;
      const operations: string[] = [];
      const off = onStampedeEvent((event) => {
        if (event.type === 'backend-error' && event.cache === a.name) operations.push(event.operation);
      });
      const failed = await run(a.cache).then(
        () => undefined,
        (error: unknown) => error as Error & { code?: string; cause?: unknown },
      );
      off();
      expect(failed?.name).toBe('CacheBusError');
      expect(failed?.code).toBe(BUS_ERROR_CODE);
      expect(failed).toBeInstanceOf(CacheBusError);
      expect(isCacheBusError(failed)).toBe(true);
      expect(failed?.message).toMatch(/remote cache was changed.*localTtl \(60000 ms\)/);
      expect((failed?.cause as Error | undefined)?.message).toBe('publish timed out');
      // Counted once, as the failed publish (the core does not count the call's failure again).
      expect(operations).toEqual(['publish']);
      // The remote was changed; b's copy stays until localTtl (what the error says).
      store.publishFails = false;
      expect(await getValue(b.cache, 'k')).toBe('old');
      expect(store.read('k')?.value).not.toBe('old');
    },
  );

  it('a fill whose bus message fails still answers its callers (the failure is only counted)', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    store.publishFails = true;
    expect(await getOrComputeWith(a.cache, 'k', tagged, () => 'v')).toBe('v');
    await settled(a.cache);
    expect(store.read('k')?.value).toBe('v');
    expect(a.counters()?.backendErrors).toBe(1);
  });

  it("a setValue whose remote write fails rejects with the remote's error, not the bus's", async () => {
    const store = new RemoteStore();
    const a = replica(store);
    store.down = true; // the write and the publish both fail
    await expect(setValue(a.cache, 'k', 'v', tagged)).rejects.toThrow('remote down');
  });

  it('an invalidateTag rejected for the bus still counts its tags and emits its event: they were invalidated', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    store.publishFails = true;
    const events: string[] = [];
    const off = onStampedeEvent((event) => {
      if (event.cache === a.name)
        events.push(event.type === 'backend-error' ? `error:${event.operation}` : event.type);
    });
    const before = stats().tagInvalidations;
    await expect(invalidateTag(a.cache, 'group')).rejects.toMatchObject({ code: BUS_ERROR_CODE });
    off();
    expect(stats().tagInvalidations - before).toBe(1);
    expect(events).toEqual(['error:publish', 'tag-invalidation']);
  });

  it('rejects on a replica that has lost its own subscription too, and on one that never listens', async () => {
    const store = new RemoteStore();
    const a = replica(store);
    store.drop(a.remote);
    store.publishFails = true;
    await expect(invalidate(a.cache, 'k')).rejects.toMatchObject({ code: BUS_ERROR_CODE });
    // A bus this replica only publishes on (Cloudflare Workers: it never subscribes).
    const remote = remoteCache(store, { tags: true });
    const publish = remote.bus?.publish;
    if (publish === undefined) throw new Error('the fake remote has a bus');
    const publishOnly = { ...remote, bus: { publish, subscribe: () => () => {} } };
    const worker = createTieredCache({ local: localCache(), remote: publishOnly, name: 'publish-only' });
    await expect(invalidateTag(worker, 'group')).rejects.toMatchObject({ code: BUS_ERROR_CODE });
  });

  it('a replica that has lost its own subscription cannot hear acknowledgements: it waits BUS_ACK_TIMEOUT_MS when others received the message', async () => {
    const { store, a, b } = await twoReplicas('old');
    expect(await getValue(b.cache, 'k')).toBe('old');
    store.drop(a.remote);
    let resolved = false;
    const changed = invalidate(a.cache, 'k').then(() => {
      resolved = true;
    });
    await vi.advanceTimersByTimeAsync(BUS_ACK_TIMEOUT_MS - 1);
    expect(resolved).toBe(false);
    expect(b.local.get('k')).toBeUndefined(); // b heard it at once
    await vi.advanceTimersByTimeAsync(1);
    await changed;
    // With nobody else to tell, it resolves at once.
    store.drop(b.remote);
    let alone = false;
    const lonely = invalidate(a.cache, 'k').then(() => {
      alone = true;
    });
    await flush();
    expect(alone).toBe(true);
    await lonely;
  });
});
