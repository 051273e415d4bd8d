import { describe, expectTypeOf, it } from 'vitest';
import type * as Adapter from '../src/adapter.js';
import type * as Main from '../src/index.js';

// entry-points.test.ts holds the runtime names of each entry to a list; types vanish at runtime, so
// the adapter kit's types are checked here: each `@ts-expect-error` fails the type check as soon as
// the main entry exports that type again.
describe('the adapter kit types stay out of the main entry', () => {
  it('the serializer, envelope and Redis-protocol types are not on @stampede/core', () => {
    // @ts-expect-error: adapter kit only
    type _Serializer = Main.Serializer;
    // @ts-expect-error: adapter kit only
    type _SerializerOption = Main.SerializerOption;
    // @ts-expect-error: adapter kit only
    type _LegacySerializer = Main.LegacySerializer;
    // @ts-expect-error: adapter kit only
    type _Envelope = Main.Envelope;
    // @ts-expect-error: adapter kit only
    type _RemoteKeys = Main.RemoteKeys;
    // @ts-expect-error: adapter kit only
    type _RemoteWriteOptions = Main.RemoteWriteOptions;
    // @ts-expect-error: adapter kit only
    type _ServerClock = Main.ServerClock;
    // @ts-expect-error: adapter kit only
    type _ServerClockOptions = Main.ServerClockOptions;
    // @ts-expect-error: adapter kit only
    type _WriteGuardArgs = Main.WriteGuardArgs;
    expectTypeOf<Adapter.Serializer>().toHaveProperty('stringify');
  });

  it('the Redis-protocol types are on neither entry (they live in @stampede/redis-protocol)', () => {
    // @ts-expect-error: moved to @stampede/redis-protocol
    type _RemoteKeys = Adapter.RemoteKeys;
    // @ts-expect-error: moved to @stampede/redis-protocol
    type _ServerClock = Adapter.ServerClock;
    // @ts-expect-error: moved to @stampede/redis-protocol
    type _WriteGuardArgs = Adapter.WriteGuardArgs;
    expectTypeOf<typeof Adapter.raceTimeout>().toBeFunction();
  });

  it('the Cache contract types are one and the same from both entries', () => {
    expectTypeOf<Main.Cache>().toEqualTypeOf<Adapter.Cache>();
    expectTypeOf<Main.CacheEntry<number>>().toEqualTypeOf<Adapter.CacheEntry<number>>();
    expectTypeOf<Main.CacheSetOptions>().toEqualTypeOf<Adapter.CacheSetOptions>();
    expectTypeOf<Main.FillLock>().toEqualTypeOf<Adapter.FillLock>();
    expectTypeOf<Main.FillOutcome>().toEqualTypeOf<Adapter.FillOutcome>();
    expectTypeOf<Main.CacheBus>().toEqualTypeOf<Adapter.CacheBus>();
    expectTypeOf<Main.CacheBusHandlers>().toEqualTypeOf<Adapter.CacheBusHandlers>();
    expectTypeOf<Main.MaybePromise<string>>().toEqualTypeOf<Adapter.MaybePromise<string>>();
    expectTypeOf<Main.Duration>().toEqualTypeOf<Adapter.Duration>();
  });

  it('shouldReplace takes what is stored (or nothing) and the incoming entry', () => {
    expectTypeOf<typeof Adapter.shouldReplace>().toEqualTypeOf<
      (stored: Main.CacheEntry | undefined, incoming: Main.CacheEntry) => boolean
    >();
  });
});
