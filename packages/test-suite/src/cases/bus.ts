import type { Cache, CacheBus } from '@stampede/core';
import { expect, it } from 'vitest';
import type { SuiteContext } from '../context.js';

/** The bus of a cache that declares `bus: true`; throws when it has none. */
export function busOf(cache: Cache): CacheBus {
  if (cache.bus === undefined) throw new Error('the cache declares bus: true but has no bus');
  return cache.bus;
}

/** A message no other run, test or instance sends. */
export function unique(label: string): string {
  return `${label}|${Math.random().toString(36).slice(2)}|${Date.now()}`;
}

/** A subscriber on a cache's bus: what it heard, and how often its subscription was acknowledged. */
export interface BusListener {
  /** Every message heard, in order of arrival. */
  readonly heard: string[];
  /** Stops this subscriber (the function `subscribe` returned). */
  stop(): void;
  /** How many times `subscribed()` was called. */
  acknowledged(): number;
}

/** Subscribes on `cache` and waits for the acknowledgement (pub/sub takes a moment). */
export async function listenOn(ctx: SuiteContext, cache: Cache): Promise<BusListener> {
  const heard: string[] = [];
  let acknowledged = 0;
  const stop = busOf(cache).subscribe({
    message: (text) => heard.push(text),
    subscribed: () => {
      acknowledged++;
    },
  });
  expect(await ctx.until(() => acknowledged > 0), 'subscribed() is called once listening').toBe(true);
  return { heard, stop, acknowledged: () => acknowledged };
}

/**
 * The invalidation bus: what one instance publishes reaches every subscriber on the namespace, the
 * publisher's own included (a tiered cache filters its own messages by their origin).
 */
export function busCases(ctx: SuiteContext): void {
  const { bus } = ctx.options.capabilities;

  const listen = (cache: Cache) => listenOn(ctx, cache);

  it.skipIf(!bus)("delivers a message to another instance's subscriber", async () => {
    const publisher = ctx.cache();
    const listener = await listen(await ctx.peer());
    try {
      const message = unique('k|to the replica');
      await busOf(publisher).publish(message);
      expect(await ctx.until(() => listener.heard.includes(message))).toBe(true);
      expect(listener.acknowledged()).toBe(1);
    } finally {
      listener.stop();
    }
  });

  it.skipIf(!bus)("delivers a publisher's own messages to its own subscriber, text unchanged", async () => {
    const cache = ctx.cache();
    const listener = await listen(cache);
    try {
      const messages = [unique('own'), unique('k|a key with | bars, spaces and ünïcødé')];
      for (const message of messages) await busOf(cache).publish(message);
      expect(await ctx.until(() => listener.heard.length >= 2)).toBe(true);
      // In any order: on a Redis Cluster two PUBLISHes may reach the subscriber's node by different
      // nodes of the cluster bus. The bus's messages are idempotent evictions, order-free.
      expect([...listener.heard].sort()).toEqual([...messages].sort());
    } finally {
      listener.stop();
    }
  });

  it.skipIf(!bus)('stops delivering to a subscriber once stopped; the others still hear', async () => {
    const cache = ctx.cache();
    const stopped = await listen(cache);
    const witness = await listen(await ctx.peer());
    try {
      stopped.stop();
      const message = unique('after stop');
      await busOf(cache).publish(message);
      expect(await ctx.until(() => witness.heard.includes(message))).toBe(true);
      expect(stopped.heard).not.toContain(message);
    } finally {
      stopped.stop();
      witness.stop();
    }
  });

  it.skipIf(!bus)('keeps instances of other namespaces apart', async () => {
    const other = await ctx.options.create();
    const stranger = await listen(other);
    const witness = await listen(ctx.cache());
    try {
      const message = unique('namespaced');
      await busOf(ctx.cache()).publish(message);
      expect(await ctx.until(() => witness.heard.includes(message))).toBe(true);
      expect(stranger.heard).not.toContain(message);
    } finally {
      stranger.stop();
      witness.stop();
    }
  });
}
