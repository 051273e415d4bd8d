import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Flight } from '../src/flight.js';
import type { CacheFillError } from '../src/index.js';
import { settle } from './helpers.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function flight(overrides: { background?: boolean; fillTimeout?: number } = {}) {
  const registry = new Map<string, Flight>();
  const onTimeout = vi.fn();
  const onSettle = vi.fn();
  const created = new Flight({
    key: 'k',
    background: overrides.background ?? false,
    registry,
    fillTimeout: overrides.fillTimeout,
    onTimeout,
    onSettle,
  });
  return { flight: created, registry, onTimeout, onSettle };
}

describe('Flight', () => {
  it('enters its registry when created and leaves it on detach, unless a newer flight took the key', () => {
    const { flight: first, registry } = flight();
    expect(registry.get('k')).toBe(first);
    const second = new Flight({
      key: 'k',
      background: false,
      registry,
      fillTimeout: undefined,
      onTimeout: () => {},
    });
    first.detach();
    expect(registry.get('k')).toBe(second);
    second.detach();
    expect(registry.size).toBe(0);
  });

  it('gives itself up when its fillTimeout passes: it leaves the registry, its callers hear, the fill is aborted', async () => {
    const { flight: f, registry, onTimeout, onSettle } = flight({ fillTimeout: 100 });
    expect(f.deadline).toBe(100);
    const leader = settle(f.joinAsLeader(undefined, undefined));
    const joiner = settle(f.join(undefined, undefined));
    await vi.advanceTimersByTimeAsync(99);
    expect(f.result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(registry.size).toBe(0);
    expect(f.result).toMatchObject({ ok: false, kind: 'timeout' });
    expect(f.controller.signal.aborted).toBe(true);
    expect(onTimeout).toHaveBeenCalledTimes(1);
    expect(onSettle).toHaveBeenCalledTimes(1);
    for (const result of [await leader, await joiner]) {
      expect(result.ok).toBe(false);
      expect((result as { error: CacheFillError }).error.kind).toBe('timeout');
    }
    expect(f.settle({ ok: true, value: 1 })).toBe(false);
  });

  it('clears its fillTimeout when it settles first', async () => {
    const { flight: f, onTimeout, onSettle } = flight({ fillTimeout: 100 });
    const leader = settle(f.joinAsLeader(undefined, undefined));
    expect(vi.getTimerCount()).toBe(1);
    expect(f.settle({ ok: true, value: 'v' })).toBe(true);
    // No timer is left to keep the process alive for the rest of a long fillTimeout.
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(onTimeout).not.toHaveBeenCalled();
    expect(onSettle).toHaveBeenCalledTimes(1);
    expect(f.controller.signal.aborted).toBe(false);
    expect(await leader).toEqual({ ok: true, value: 'v' });
  });

  it('is abandoned when the last caller leaves, not before', async () => {
    const { flight: f, registry } = flight();
    const leaderLeaves = new AbortController();
    const joinerLeaves = new AbortController();
    const leader = settle(f.joinAsLeader(leaderLeaves.signal, undefined));
    const joiner = settle(f.join(joinerLeaves.signal, undefined));
    expect(f.callers).toBe(2);
    leaderLeaves.abort(new Error('leader gone'));
    expect(f.callers).toBe(1);
    expect(f.result).toBeUndefined();
    expect(f.controller.signal.aborted).toBe(false);
    const reason = new Error('joiner gone');
    joinerLeaves.abort(reason);
    expect(f.result).toMatchObject({ ok: false, kind: 'abandoned' });
    expect(registry.size).toBe(0);
    expect(f.controller.signal.reason).toBe(reason);
    expect((await leader).ok).toBe(false);
    expect(await joiner).toEqual({ ok: false, error: reason });
  });

  it('as a background refresh, is never abandoned by a joiner that leaves', () => {
    const { flight: f, registry } = flight({ background: true });
    const leaves = new AbortController();
    void settle(f.join(leaves.signal, undefined));
    leaves.abort();
    expect(f.callers).toBe(0);
    expect(f.result).toBeUndefined();
    expect(registry.get('k')).toBe(f);
    expect(f.controller.signal.aborted).toBe(false);
  });

  it("gives the leader the fill's own error and every other caller one shared 'fill_failed'", async () => {
    const { flight: f } = flight();
    const leader = settle(f.joinAsLeader(undefined, undefined));
    const joiners = [settle(f.join(undefined, undefined)), settle(f.join(undefined, undefined))];
    const cause = new Error('db down');
    f.settle({ ok: false, kind: 'fill', error: cause });
    const leaderError = (await leader) as { error: CacheFillError };
    expect(leaderError.error.kind).toBe('fill');
    expect(leaderError.error.cause).toBe(cause);
    const [a, b] = (await Promise.all(joiners)) as { error: CacheFillError }[];
    expect(a?.error.kind).toBe('fill_failed');
    expect(a?.error).toBe(b?.error);
    const late = (await settle(f.join(undefined, undefined))) as { error: CacheFillError };
    expect(late.error).toBe(a?.error);
  });

  it('gives a joiner whose own limit ends before the deadline a timer of its own; the flight goes on', async () => {
    const { flight: f } = flight({ fillTimeout: 100 });
    const leader = settle(f.joinAsLeader(undefined, undefined));
    const early = settle(f.join(undefined, 40));
    await vi.advanceTimersByTimeAsync(40);
    const result = (await early) as { ok: boolean; error: CacheFillError };
    expect(result.ok).toBe(false);
    expect(result.error.kind).toBe('timeout');
    expect(f.result).toBeUndefined();
    expect(f.callers).toBe(1);
    f.settle({ ok: true, value: 'v' });
    expect(await leader).toEqual({ ok: true, value: 'v' });
  });
});
