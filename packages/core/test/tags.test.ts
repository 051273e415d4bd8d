import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  configure,
  getOrComputeWith,
  getValue,
  invalidate,
  invalidateTag,
  invalidateTags,
  onStampedeEvent,
  resetStats,
  type StampedeEvent,
  setValue,
  stats,
} from '../src/index.js';
import { Backend, deferred, testCache } from './helpers.js';

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('invalidateTag', () => {
  it('drops every entry that carried the tag, and only those', async () => {
    const cache = testCache({ tags: true });
    await setValue(cache, 'p7:1', 'page 1', { tags: ['product:7'] });
    await getOrComputeWith(cache, 'p7:2', { tags: ['product:7', 'pages'] }, () => 'page 2');
    await getOrComputeWith(cache, 'p8:1', { tags: ['product:8', 'pages'] }, () => 'other');
    await setValue(cache, 'plain', 'untagged');
    vi.advanceTimersByTime(1);
    await invalidateTag(cache, 'product:7');
    expect(await getValue(cache, 'p7:1')).toBeUndefined();
    expect(await getValue(cache, 'p7:2')).toBeUndefined();
    expect(await getValue(cache, 'p8:1')).toBe('other');
    expect(await getValue(cache, 'plain')).toBe('untagged');
    // The next call fills again, and its value (created after the invalidation) is kept.
    vi.advanceTimersByTime(1);
    const fill = vi.fn(() => 'page 2 v2');
    expect(await getOrComputeWith(cache, 'p7:2', { tags: ['product:7'] }, fill)).toBe('page 2 v2');
    expect(await getOrComputeWith(cache, 'p7:2', { tags: ['product:7'] }, fill)).toBe('page 2 v2');
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('an entry created in the same millisecond as the invalidation counts as before it', async () => {
    const cache = testCache({ tags: true });
    await setValue(cache, 'k', 'v', { tags: ['t'] });
    await invalidateTag(cache, 't');
    expect(await getValue(cache, 'k')).toBeUndefined();
  });

  it('a fill in flight at the invalidation is delivered to its callers but not written', async () => {
    const cache = testCache({ tags: true });
    const gate = deferred<string>();
    const first = getOrComputeWith(cache, 'k', { tags: ['t'] }, () => gate.promise);
    await vi.advanceTimersByTimeAsync(5);
    await invalidateTag(cache, 't');
    gate.resolve('read before the change');
    expect(await first).toBe('read before the change');
    expect(cache.calls.set).toBe(0);
    // A caller after the invalidation does not join the old fill: it fills afresh.
    expect(await getOrComputeWith(cache, 'k', { tags: ['t'] }, () => 'new')).toBe('new');
  });

  it("another replica's fill that started before the invalidation and lands after it is never served", async () => {
    const backend = new Backend();
    const a = testCache({ backend, tags: true, name: 'a' });
    const b = testCache({ backend, tags: true, name: 'b' });
    const gate = deferred<string>();
    const onB = getOrComputeWith(b, 'k', { tags: ['t'] }, () => gate.promise);
    await vi.advanceTimersByTimeAsync(5);
    await invalidateTag(a, 't');
    await vi.advanceTimersByTimeAsync(5);
    gate.resolve('old');
    expect(await onB).toBe('old');
    expect(b.calls.set).toBe(1);
    expect(await getOrComputeWith(a, 'k', { tags: ['t'] }, () => 'new')).toBe('new');
  });

  it('a stale value carrying the tag is not served within its grace: a cold miss instead', async () => {
    const cache = testCache({ tags: true });
    const options = { ttl: '1s', staleWhileRevalidate: '1h', tags: ['t'] } as const;
    await getOrComputeWith(cache, 'k', options, () => 'old');
    vi.advanceTimersByTime(2_000);
    await invalidateTag(cache, 't');
    vi.advanceTimersByTime(1);
    expect(await getOrComputeWith(cache, 'k', options, () => 'new')).toBe('new');
    expect(stats().staleHits).toBe(0);
  });

  it('counts tags and emits an event', async () => {
    const cache = testCache({ tags: true });
    const events: StampedeEvent[] = [];
    const off = onStampedeEvent((event) => events.push(event));
    await invalidateTags(cache, ['a', 'b', 'a']);
    await invalidateTag(cache, 'c');
    await invalidateTags(cache, []);
    off();
    expect(stats().tagInvalidations).toBe(3);
    expect(events.filter((event) => event.type === 'tag-invalidation')).toEqual([
      { type: 'tag-invalidation', cache: 'test', tags: ['a', 'b'] },
      { type: 'tag-invalidation', cache: 'test', tags: ['c'] },
    ]);
  });

  it('a backend fault rejects, is counted, and invalidates nothing in the count', async () => {
    const cache = testCache({ tags: true });
    cache.invalidateTags = () => Promise.reject(new Error('down'));
    await expect(invalidateTag(cache, 't')).rejects.toThrow('down');
    expect(stats()).toMatchObject({ backendErrors: 1, tagInvalidations: 0 });
  });
});

describe('tags: bad input, before any I/O', () => {
  it.each([['a'], [[1]], [['']], [null], [{ length: 1, 0: 'a' }]])(
    'tags %j is a TypeError naming options.tags',
    async (tags) => {
      const cache = testCache({ tags: true });
      await expect(getOrComputeWith(cache, 'k', { tags: tags as never }, () => 1)).rejects.toThrow(
        /options\.tags/,
      );
      await expect(setValue(cache, 'k', 1, { tags: tags as never })).rejects.toThrow(/options\.tags/);
      expect(cache.calls.get + cache.calls.set).toBe(0);
    },
  );

  it('invalidateTag(cache, tag) names tag; invalidateTags names tags', async () => {
    const cache = testCache({ tags: true });
    const spy = vi.spyOn(cache, 'invalidateTags');
    await expect(invalidateTag(cache, '')).rejects.toThrow(/^tag must be a non-empty string/);
    await expect(invalidateTag(cache, 7 as never)).rejects.toThrow(TypeError);
    await expect(invalidateTags(cache, 'ab' as never)).rejects.toThrow(/^tags must be an array/);
    await expect(invalidateTags(cache, ['ok', ''])).rejects.toThrow(/^tags must be an array/);
    // `null` and arrays are named as such, as everywhere else (not 'object').
    await expect(invalidateTag(cache, null as never)).rejects.toThrow(
      new TypeError('tag must be a non-empty string; got null'),
    );
    await expect(invalidateTags(cache, ['ok', null] as never)).rejects.toThrow(
      new TypeError('tags must be an array of non-empty strings; it holds null'),
    );
    await expect(invalidateTags(cache, [['a']] as never)).rejects.toThrow(/it holds array$/);
    expect(spy).not.toHaveBeenCalled();
  });

  it('a cache that cannot invalidate tags: a TypeError naming the cache', async () => {
    const cache = testCache({ name: 'plain' });
    await expect(invalidateTag(cache, 't')).rejects.toThrow(
      /^cache 'plain' cannot invalidate tags: it has no invalidateTags method/,
    );
    // Tagged writes still work on it: the tags are stored, only invalidation needs the capability.
    expect(await getOrComputeWith(cache, 'k', { tags: ['t'] }, () => 1)).toBe(1);
  });
});

// Random interleavings on two replicas over one backend: tagged fills (fast and slow), SWR reads,
// setValue, invalidate and invalidateTag. The property: a call that starts after an invalidateTag
// resolved never gets a value whose fill (or setValue) started before that invalidateTag was called.
// One exception, as for `invalidate`: a call on another replica than the one that invalidated may
// join a fill already running there (in-process coalescing cannot hear of another replica's
// invalidation); that fill's value is delivered but, being older than the tag, never read back.
describe('tags under random interleavings', () => {
  type Command =
    | { kind: 'get'; replica: number; key: number; slow: boolean }
    | { kind: 'set'; replica: number; key: number }
    | { kind: 'invalidate'; replica: number; key: number }
    | { kind: 'tag'; replica: number; tag: number }
    | { kind: 'advance'; ms: number };

  const command: fc.Arbitrary<Command> = fc.oneof(
    fc.record({ kind: fc.constant('get' as const), replica: fc.nat(1), key: fc.nat(2), slow: fc.boolean() }),
    fc.record({ kind: fc.constant('set' as const), replica: fc.nat(1), key: fc.nat(2) }),
    fc.record({ kind: fc.constant('invalidate' as const), replica: fc.nat(1), key: fc.nat(2) }),
    fc.record({ kind: fc.constant('tag' as const), replica: fc.nat(1), tag: fc.nat(1) }),
    fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(0, 1, 40, 150, 400) }),
  );
  // Which tags each key carries: k0 ['t0'], k1 ['t0', 't1'], k2 ['t1'].
  const TAGS = [['t0'], ['t0', 't1'], ['t1']] as const;

  interface Floor {
    /** The sequence number at which the invalidation was called. */
    readonly seq: number;
    /** The replica that invalidated. */
    readonly replica: number;
  }

  it('never serves a value older than a tag invalidation that resolved before the call', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(command, { minLength: 5, maxLength: 40 }),
        fc.boolean(),
        async (commands, async) => {
          vi.useFakeTimers({ now: 1_000_000 });
          run++;
          const backend = new Backend();
          const caches = [0, 1].map((i) =>
            testCache({ backend, tags: true, async, name: `prop-${run}-${i}` }),
          );
          let seq = 0;
          // For each tag, the last *resolved* invalidation.
          const invalidatedBefore = new Map<string, Floor>();
          // The fills running on each replica, by their sequence number.
          const running = [new Set<number>(), new Set<number>()];
          const checks: Promise<void>[] = [];
          const options = (key: number) =>
            ({ ttl: 100, staleWhileRevalidate: 300, tags: TAGS[key] as readonly string[] }) as const;
          const expectNewer = (
            key: number,
            floors: Map<string, Floor>,
            value: { seq: number },
            replica: number,
            joinable: ReadonlySet<number>,
          ): void => {
            for (const tag of TAGS[key] ?? []) {
              const floor = floors.get(tag);
              if (floor === undefined || value.seq >= floor.seq) continue;
              if (floor.replica !== replica && joinable.has(value.seq)) continue;
              throw new Error(
                `k${key} served a value from #${value.seq}, older than ${tag}'s invalidation #${floor.seq}`,
              );
            }
          };
          for (const c of commands) {
            const cache = caches[c.kind === 'advance' ? 0 : c.replica];
            if (cache === undefined) continue;
            if (c.kind === 'get') {
              const floors = new Map(invalidatedBefore);
              const mine = running[c.replica] ?? new Set<number>();
              const joinable = new Set(mine);
              const call = getOrComputeWith(cache, `k${c.key}`, options(c.key), async () => {
                const value = { seq: ++seq };
                mine.add(value.seq);
                if (c.slow) await new Promise((resolve) => setTimeout(resolve, 120));
                mine.delete(value.seq);
                return value;
              });
              checks.push(call.then((value) => expectNewer(c.key, floors, value, c.replica, joinable)));
            } else if (c.kind === 'set') {
              await setValue(cache, `k${c.key}`, { seq: ++seq }, options(c.key));
            } else if (c.kind === 'invalidate') {
              await invalidate(cache, `k${c.key}`);
            } else if (c.kind === 'tag') {
              const calledAt = ++seq;
              const tag = `t${c.tag}`;
              await invalidateTag(cache, tag);
              invalidatedBefore.set(tag, { seq: calledAt, replica: c.replica });
            } else {
              await vi.advanceTimersByTimeAsync(c.ms);
            }
          }
          await vi.advanceTimersByTimeAsync(2_000);
          const failed = (await Promise.allSettled(checks)).find((result) => result.status === 'rejected');
          if (failed !== undefined) throw failed.reason;
          // Whatever is left readable is newer than every invalidation of its tags.
          for (const key of [0, 1, 2]) {
            for (const [replica, cache] of caches.entries()) {
              const value = await getValue<{ seq: number }>(cache, `k${key}`, { allowStale: true });
              if (value !== undefined) expectNewer(key, invalidatedBefore, value, replica, new Set());
            }
          }
          vi.useRealTimers();
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('tags with fail-safe and early refresh', () => {
  afterEach(() => {
    configure({ random: Math.random });
  });

  it('a re-armed tagged value keeps its tags, and an invalidation of one still refuses it', async () => {
    const cache = testCache({ tags: true });
    const options = { ttl: 1_000, tags: ['t'], failSafe: { maxStale: 60_000, throttle: 30_000 } };
    expect(await getOrComputeWith(cache, 'k', options, () => 'v1')).toBe('v1');
    vi.advanceTimersByTime(2_000);
    const failing = vi.fn(() => {
      throw new Error('source down');
    });
    // Fail-safe answers with the previous value and writes it back fresh, tags included.
    expect(await getOrComputeWith(cache, 'k', options, failing)).toBe('v1');
    expect(stats().failSafeActivations).toBe(1);
    const rearmed = cache.backend.entries.get('k')?.entry;
    expect(rearmed?.freshUntil).toBe(Date.now() + 30_000);
    expect(rearmed?.tags).toEqual(['t']);
    vi.advanceTimersByTime(1);
    await invalidateTag(cache, 't');
    expect(await getValue(cache, 'k')).toBeUndefined();
    // And it is no fallback any more: the failure stands.
    await expect(getOrComputeWith(cache, 'k', options, failing)).rejects.toThrow('source down');
  });

  it('an early refresh writes the tags of the call that started it', async () => {
    configure({ random: () => 0 }); // the largest head start: every fresh hit refreshes early
    const cache = testCache({ tags: true });
    const options = { ttl: 60_000, tags: ['t', 'u'], earlyRefresh: true };
    let n = 0;
    const fill = async () => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return `v${++n}`;
    };
    const first = getOrComputeWith(cache, 'k', options, fill);
    await vi.advanceTimersByTimeAsync(100);
    expect(await first).toBe('v1');
    // Well inside the head start (36 x delta before the end of freshness): a hit that refreshes.
    vi.advanceTimersByTime(60_000 - 1_000);
    expect(await getOrComputeWith(cache, 'k', options, fill)).toBe('v1');
    await vi.advanceTimersByTimeAsync(100);
    expect(stats().earlyRefreshes).toBe(1);
    const refreshed = cache.backend.entries.get('k')?.entry;
    expect(refreshed?.value).toBe('v2');
    expect(refreshed?.tags).toEqual(['t', 'u']);
    expect(refreshed?.delta).toBe(100);
    vi.advanceTimersByTime(1);
    await invalidateTag(cache, 'u');
    expect(await getValue(cache, 'k')).toBeUndefined();
  });
});
