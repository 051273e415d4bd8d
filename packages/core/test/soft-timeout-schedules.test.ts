// softTimeout under the schedules an outside probe found single-feature tests miss: an invalidation
// that resolves while the fill runs and before its soft timeout (the previous value must not answer
// after it), another replica changing the key meanwhile, and callers that join after the early
// answer (only a caller whose own fail-safe would answer with that value gets it; the others wait
// for the fill, and leaving does not abandon it).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type GetOrComputeOptions,
  getOrCompute,
  getOrComputeWith,
  inFlightCount,
  invalidateTag,
  resetStats,
  stats,
} from '../src/index.js';
import { Backend, deferred, flush, settle, testCache } from './helpers.js';

const TTL = 10_000;
const MAX_STALE = 60_000;
const SOFT = 200;
const FS: GetOrComputeOptions = { ttl: TTL, failSafe: { maxStale: MAX_STALE }, softTimeout: SOFT };

beforeEach(() => {
  resetStats();
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A cache holding `v1` for `k` (tagged `tags`), just expired: a miss with a fail-safe fallback. */
async function expiredValue(tags?: readonly string[], backend = new Backend()) {
  const cache = testCache({ tags: true, backend });
  await getOrComputeWith(cache, 'k', { ...FS, ...(tags === undefined ? {} : { tags }) }, () => 'v1');
  vi.advanceTimersByTime(TTL);
  return cache;
}

describe('an invalidation before the soft timeout', () => {
  it('of a tag the previous value carries: the soft timeout does not answer with it, even for a reader without that tag', async () => {
    const cache = await expiredValue(['group']);
    const gate = deferred<string>();
    const call = settle(getOrComputeWith(cache, 'k', FS, () => gate.promise));
    await vi.advanceTimersByTimeAsync(50);
    await invalidateTag(cache, 'group');
    await vi.advanceTimersByTimeAsync(SOFT);
    let answered = false;
    void call.then(() => {
      answered = true;
    });
    await flush();
    expect(answered).toBe(false);
    gate.resolve('v2');
    expect(await call).toEqual({ ok: true, value: 'v2' });
    expect(stats().softTimeouts).toBe(0);
  });

  it('by another replica (the key deleted from the shared store): the re-read finds nothing, the caller waits for the fill', async () => {
    const backend = new Backend();
    const cache = await expiredValue(undefined, backend);
    const gate = deferred<string>();
    const call = settle(getOrComputeWith(cache, 'k', FS, () => gate.promise));
    await vi.advanceTimersByTimeAsync(50);
    // What another replica's `invalidate` leaves in a shared store.
    backend.entries.delete('k');
    backend.deletedAt.set('k', Date.now());
    await vi.advanceTimersByTimeAsync(SOFT);
    expect(stats().softTimeouts).toBe(0);
    gate.resolve('v2');
    expect(await call).toEqual({ ok: true, value: 'v2' });
  });

  it("another replica's newer value meanwhile is what the soft timeout answers with", async () => {
    const backend = new Backend();
    const cache = await expiredValue(undefined, backend);
    const gate = deferred<string>();
    const call = settle(getOrComputeWith(cache, 'k', FS, () => gate.promise));
    await vi.advanceTimersByTimeAsync(50);
    const now = Date.now();
    backend.write(
      'k',
      { value: 'other', createdAt: now - 5, freshUntil: now - 1, staleUntil: now - 1 },
      MAX_STALE,
    );
    await vi.advanceTimersByTimeAsync(SOFT);
    expect(await call).toEqual({ ok: true, value: 'other' });
    gate.resolve('v2');
    await flush();
  });
});

describe('a caller joining after the soft timeout answered', () => {
  /** A fill of `k` (tagged `group` before) still running after its soft timeout answered `first`. */
  async function answeredEarly() {
    const cache = await expiredValue(['group']);
    const gate = deferred<string>();
    const fill = vi.fn(() => gate.promise);
    const call = getOrComputeWith(cache, 'k', FS, fill);
    await vi.advanceTimersByTimeAsync(SOFT);
    return { cache, gate, fill, first: await call };
  }

  it('gets the previous value at once only with its own fail-safe and soft timeout, within its maxStale', async () => {
    const { cache, gate, fill, first } = await answeredEarly();
    expect(first).toBe('v1');
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('v1');
    // Without fail-safe (or without a soft timeout) a caller never gets a previous value: it waits.
    const plain = settle(getOrCompute(cache, 'k', TTL, fill));
    const noSoft = settle(getOrComputeWith(cache, 'k', { ttl: TTL, failSafe: true }, fill));
    let answered = 0;
    for (const call of [plain, noSoft]) void call.then(() => answered++);
    await flush();
    expect(answered).toBe(0);
    gate.resolve('v2');
    expect(await plain).toEqual({ ok: true, value: 'v2' });
    expect(await noSoft).toEqual({ ok: true, value: 'v2' });
    expect(fill).toHaveBeenCalledTimes(1);
  });

  it('past its own maxStale it waits for the fill', async () => {
    const { cache, gate, fill } = await answeredEarly();
    const shortStale = { ...FS, failSafe: { maxStale: 100 } };
    const late = settle(getOrComputeWith(cache, 'k', shortStale, fill));
    let answered = false;
    void late.then(() => {
      answered = true;
    });
    await flush();
    expect(answered).toBe(false);
    gate.resolve('v2');
    expect(await late).toEqual({ ok: true, value: 'v2' });
  });

  it('after another replica deleted or replaced the key (unheard here), its read decides: nobody gets the previous value', async () => {
    const { cache, gate, fill } = await answeredEarly();
    // Another replica's `invalidate`, in the shared store.
    cache.backend.entries.delete('k');
    cache.backend.deletedAt.set('k', Date.now());
    const afterDelete = settle(getOrComputeWith(cache, 'k', FS, fill));
    let answered = false;
    void afterDelete.then(() => {
      answered = true;
    });
    await flush();
    expect(answered).toBe(false);
    // Another replica's `setValue`: a fresh value, which this replica's read finds.
    const now = Date.now();
    cache.backend.write(
      'k',
      { value: 'set', createdAt: now, freshUntil: now + TTL, staleUntil: now + TTL },
      TTL,
    );
    expect(await getOrComputeWith(cache, 'k', FS, fill)).toBe('set');
    gate.resolve('v2');
    expect(await afterDelete).toEqual({ ok: true, value: 'v2' });
  });

  it('once a tag of the previous value was invalidated, nobody gets it', async () => {
    const { cache, gate, fill } = await answeredEarly();
    await invalidateTag(cache, 'group');
    const late = settle(getOrComputeWith(cache, 'k', FS, fill));
    await flush();
    gate.resolve('v2');
    expect(await late).toEqual({ ok: true, value: 'v2' });
  });

  it('leaving on its own signal does not abandon the fill: its value is still written', async () => {
    const { cache, gate, fill } = await answeredEarly();
    const leaves = new AbortController();
    const late = settle(getOrComputeWith(cache, 'k', { ttl: TTL, signal: leaves.signal }, fill));
    leaves.abort(new Error('client went away'));
    expect(await late).toEqual({ ok: false, error: new Error('client went away') });
    gate.resolve('v2');
    await flush();
    expect(inFlightCount(cache)).toBe(0);
    expect(cache.backend.read('k')?.value).toBe('v2');
    expect(fill).toHaveBeenCalledTimes(1);
  });
});
