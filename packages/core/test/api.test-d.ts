import { describe, expectTypeOf, it } from 'vitest';
import {
  type Cache,
  type CacheFillError,
  type Duration,
  type FailSafeOptions,
  type FillContext,
  type GetOrComputeOptions,
  getOrCompute,
  getOrComputeWith,
  getValue,
  invalidate,
  isCacheFillError,
  jitteredTtl,
  type StampedeEvent,
  type StampedeStats,
  setValue,
  stats,
} from '../src/index.js';

declare const cache: Cache;

describe('public signatures', () => {
  it('getOrCompute infers the value type from the fill, sync or async', () => {
    expectTypeOf(getOrCompute(cache, 'k', '30s', () => 42)).toEqualTypeOf<Promise<number>>();
    expectTypeOf(getOrCompute(cache, 'k', 30_000, async () => ({ n: 1 }))).toEqualTypeOf<
      Promise<{ n: number }>
    >();
    expectTypeOf(getOrCompute(cache, 'k', undefined, () => null)).toEqualTypeOf<Promise<null>>();
  });

  it('Duration accepts numbers and unit strings only', () => {
    expectTypeOf<250>().toMatchTypeOf<Duration>();
    expectTypeOf<'250ms'>().toMatchTypeOf<Duration>();
    expectTypeOf<'1.5h'>().toMatchTypeOf<Duration>();
    expectTypeOf<'30 seconds'>().not.toMatchTypeOf<Duration>();
    // @ts-expect-error: not a Duration
    getOrCompute(cache, 'k', '30 seconds', () => 1);
  });

  it('getOrComputeWith hands the fill a typed context', () => {
    const result = getOrComputeWith(cache, 'k', { ttl: '1m', staleWhileRevalidate: '5m' }, (ctx) => {
      expectTypeOf(ctx).toEqualTypeOf<FillContext>();
      expectTypeOf(ctx.key).toEqualTypeOf<string>();
      expectTypeOf(ctx.stale).toEqualTypeOf<unknown>();
      return 'v';
    });
    expectTypeOf(result).toEqualTypeOf<Promise<string>>();
    // @ts-expect-error: unknown option
    getOrComputeWith(cache, 'k', { tll: '1m' }, () => 1);
  });

  it('errors, values, jitter and stats', () => {
    const e: unknown = new Error();
    if (isCacheFillError(e)) {
      expectTypeOf(e).toEqualTypeOf<CacheFillError>();
      expectTypeOf(e.kind).toEqualTypeOf<'fill' | 'fill_failed' | 'timeout'>();
      expectTypeOf(e.intoFill()).toEqualTypeOf<unknown>();
    }
    expectTypeOf(getValue<number>(cache, 'k')).toEqualTypeOf<Promise<number | undefined>>();
    expectTypeOf(setValue(cache, 'k', 1, { ttl: '1m' })).toEqualTypeOf<Promise<void>>();
    expectTypeOf(invalidate(cache, 'k')).toEqualTypeOf<Promise<void>>();
    expectTypeOf(jitteredTtl('5m', 0.2)).toEqualTypeOf<number>();
    expectTypeOf(stats()).toEqualTypeOf<StampedeStats>();
  });

  it('failSafe takes true or { maxStale, throttle } durations; softTimeout a duration; events narrow', () => {
    expectTypeOf<{ failSafe: true; softTimeout: '200ms' }>().toMatchTypeOf<GetOrComputeOptions>();
    expectTypeOf<{ failSafe: { maxStale: '1h'; throttle: 30_000 } }>().toMatchTypeOf<GetOrComputeOptions>();
    expectTypeOf<{ failSafe: { maxStale: '1 hour' } }>().not.toMatchTypeOf<GetOrComputeOptions>();
    expectTypeOf<FailSafeOptions['throttle']>().toEqualTypeOf<Duration | undefined>();
    expectTypeOf<Extract<StampedeEvent, { type: 'fail-safe' }>['reason']>().toEqualTypeOf<
      'error' | 'timeout'
    >();
    expectTypeOf<Extract<StampedeEvent, { type: 'soft-timeout' }>['durationMs']>().toEqualTypeOf<number>();
    expectTypeOf<StampedeStats['failSafeActivations']>().toEqualTypeOf<number>();
  });

  it('the Cache interface allows synchronous adapters', () => {
    const sync: Cache = { get: () => undefined, set: () => {}, delete: () => {} };
    const asyncCache: Cache = { get: async () => undefined, set: async () => {}, delete: async () => {} };
    expectTypeOf(sync).toMatchTypeOf<Cache>();
    expectTypeOf(asyncCache).toMatchTypeOf<Cache>();
  });
});
