// Random schedules of stampede calls for property tests (fast-check), shared by the core (test
// caches, fake timers), the memory adapter (fake timers) and the Redis adapter (a real server, real
// time). A schedule mixes getOrCompute and getOrComputeWith (stale-while-revalidate, the fill lock,
// fillTimeout, abort, fail-safe and soft timeouts) with invalidate, setValue and the adapter's own delete on one to three replicas
// (cache objects over one store: each has its own single-flight registry, as separate processes
// would). After every schedule it checks what the docs promise under any interleaving:
// - no caller hangs (every fill that never settles has a fillTimeout);
// - a caller gets a value filled (or set) for its own key;
// - after an invalidate, setValue, delete or (with `tags`) invalidateTag resolves, no caller that
//   starts later gets an older value (for a tag: an older value that carried it):
//   on the replica that invalidated or set, from any source (the fills in flight there are
//   superseded); on any replica, from the store (for fail-safe calls, on the writer's replica only:
//   elsewhere a fill in flight may answer with the fallback it read before). What the store holds at
//   the end is not older either (no re-arm brings an invalidated value back);
// - each replica fills a key at most once at a time;
// - the registries are empty at the end;
// - the counter identities of the core README hold.
import fc from 'fast-check';

/** The part of `@stampede/core` a schedule drives (pass the module itself). */
export interface ScheduleApi<C> {
  getOrCompute(cache: C, key: string, ttl: number | undefined, fill: () => unknown): Promise<unknown>;
  getOrComputeWith(
    cache: C,
    key: string,
    options: object,
    fill: (context: FillInfo) => unknown,
  ): Promise<unknown>;
  invalidate(cache: C, key: string): Promise<void>;
  setValue(
    cache: C,
    key: string,
    value: unknown,
    options?: { ttl?: number; tags?: readonly string[] },
  ): Promise<void>;
  invalidateTag?(cache: C, tag: string): Promise<void>;
  getValue(cache: C, key: string): Promise<unknown>;
  statsByCache(): Record<string, object>;
  inFlightCount(cache: C): number;
  configure(config: { maxBackgroundRefreshes?: number; random?: () => number }): void;
  isCacheFillError(error: unknown): boolean;
}

/** What a fill is given (the fields the schedule uses). */
export interface FillInfo {
  readonly signal: AbortSignal;
  readonly background: boolean;
}

/** How time passes in a schedule. */
export interface ScheduleClock {
  /** Lets `ms` pass: advances fake timers, or sleeps. */
  advance(ms: number): Promise<void>;
}

/** The durations of a schedule (ms): small for real time, larger under fake timers. */
export interface ScheduleDurations {
  ttl: number;
  grace: number;
  /** Longest fill. */
  fillMs: number;
  /** Longest `fillTimeout` (shortest: 1). */
  fillTimeout: number;
  /** Longest delay before a caller aborts. */
  abortAfter: number;
  /** Longest pause between steps. */
  advance: number;
  lockTtl: number;
  lockWaitTimeout: number;
  lockPollInterval: number;
  /** `failSafe.maxStale` of the calls that use fail-safe. @default 3 * (ttl + grace) */
  maxStale?: number;
  /** `failSafe.throttle` of the calls that use fail-safe. @default ttl */
  throttle?: number;
}

/** One backend and the cache objects (replicas) over it, for one schedule. */
export interface ScheduleReplicas<C> {
  readonly caches: readonly C[];
  /** The cache names, for `statsByCache` (unique to this schedule). */
  readonly names: readonly string[];
  /** The adapter's own delete (`cache.delete`), which the core does not see. */
  remove(cache: C, key: string): Promise<void> | void;
  /** Releases what the replicas hold. */
  close?(): Promise<void> | void;
}

/** What a property test runs schedules against. */
export interface ScheduleTarget<C> {
  readonly api: ScheduleApi<C>;
  readonly clock: ScheduleClock;
  readonly durations: ScheduleDurations;
  /** Whether the caches offer the fill lock (schedules then use it on some calls). */
  readonly lock: boolean;
  /**
   * Whether the caches can invalidate tags: `getOrComputeWith` calls and `setValue` then carry the
   * tags `['t-<key>', 'all']`, and schedules invalidate `t-<key>` or `all`. @default false
   */
  readonly tags?: boolean;
  /** The most replicas a schedule uses (1 for an in-process cache). */
  readonly maxReplicas: number;
  /**
   * How close (ms, by `Date.now()`) to a write a value may have been produced and still be ordered
   * either way. 0 for stores that order on this process's clock; a remote store orders on its own
   * clock, which each replica knows only to within a round trip. @default 0
   */
  readonly orderingSlackMs?: number;
  /**
   * Whether a caller may join a fill of its own replica that has answered its callers but whose
   * write is still on its way, even after another replica's write resolved: true for a plain remote
   * cache (nothing tells this process of the other replica's change; the core documents that
   * window), false where every change reaches every replica before it resolves. @default false
   */
  readonly joinsWritingFlights?: boolean;
  /**
   * Whether a write reaches every replica before it resolves, superseding the fills and reads in
   * flight there as on the writer's (tiered caches on a bus that acknowledges). Then another
   * replica's fill may run beside one a write superseded, and no replica may answer a caller that
   * started after a write with an older value, whatever its source. @default false
   */
  readonly writesReachEveryReplica?: boolean;
  /** Creates `count` replicas over one fresh backend; `variant` picks adapter options (async reads...). */
  replicas(count: number, variant: number): Promise<ScheduleReplicas<C>> | ScheduleReplicas<C>;
  /** Called before each schedule (fake timers on), and after it (`done`). */
  before?(): void | Promise<void>;
  after?(): void | Promise<void>;
}

type Key = 'a' | 'b';
type WriteKind = 'invalidate' | 'set' | 'delete' | 'tag';

/** One step of a schedule. */
export type Step =
  | {
      readonly type: 'call';
      readonly replica: number;
      readonly key: Key;
      readonly with: boolean;
      readonly fill: 'ok' | 'fail' | 'hang';
      readonly fillMs: number;
      readonly swr: boolean;
      /** `earlyRefresh: { beta: 4 }` on this call. */
      readonly early: boolean;
      readonly lock: boolean;
      readonly fillTimeout: number | undefined;
      readonly abortAfter: number | undefined;
      readonly failSafe: boolean;
      readonly softTimeout: number | undefined;
    }
  | { readonly type: 'advance'; readonly ms: number }
  | {
      readonly type: 'write';
      readonly kind: WriteKind;
      readonly replica: number;
      readonly key: Key;
      readonly ttl: number | undefined;
      /** For kind 'tag': the key's own tag, or the tag every key carries. */
      readonly all?: boolean;
    };

function stepArbitrary(
  durations: ScheduleDurations,
  replicas: number,
  lock: boolean,
  tags: boolean,
): fc.Arbitrary<Step> {
  const key = fc.constantFrom<Key>('a', 'b');
  const replica = fc.integer({ min: 0, max: replicas - 1 });
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .record({
          type: fc.constant('call' as const),
          replica,
          key,
          with: fc.constantFrom(true, true, false),
          fill: fc.constantFrom('ok' as const, 'ok' as const, 'fail' as const, 'hang' as const),
          fillMs: fc.integer({ min: 0, max: durations.fillMs }),
          swr: fc.constantFrom(true, true, false),
          early: fc.constantFrom(false, false, true),
          lock: lock ? fc.constantFrom(true, true, false) : fc.constant(false),
          fillTimeout: fc.option(fc.integer({ min: 1, max: durations.fillTimeout }), { nil: undefined }),
          abortAfter: fc.option(fc.integer({ min: 1, max: durations.abortAfter }), { nil: undefined }),
          failSafe: fc.boolean(),
          softTimeout: fc.option(fc.integer({ min: 1, max: durations.fillMs }), { nil: undefined }),
        })
        .map((step) => {
          // Plain getOrCompute has no options; a fill that never settles needs a fillTimeout, or its
          // callers would rightly wait forever.
          if (!step.with) {
            const fill = step.fill === 'hang' ? 'ok' : step.fill;
            return {
              ...step,
              fill,
              swr: false,
              early: false,
              lock: false,
              fillTimeout: undefined,
              abortAfter: undefined,
              failSafe: false,
              softTimeout: undefined,
            };
          }
          // softTimeout needs failSafe.
          const softTimeout = step.failSafe ? step.softTimeout : undefined;
          if (step.fill === 'hang' && step.fillTimeout === undefined)
            return { ...step, softTimeout, fill: 'ok' as const };
          return { ...step, softTimeout };
        }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        type: fc.constant('advance' as const),
        ms: fc.integer({ min: 0, max: durations.advance }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant('write' as const),
        kind: tags
          ? fc.constantFrom<WriteKind>('invalidate', 'set', 'delete', 'tag', 'tag')
          : fc.constantFrom<WriteKind>('invalidate', 'set', 'delete'),
        replica,
        key,
        ttl: fc.option(fc.integer({ min: 0, max: durations.ttl * 2 }), { nil: undefined }),
        all: fc.boolean(),
      }),
    },
  );
}

/** A schedule: its steps, its replica count, the refresh cap and an adapter variant. */
export interface Schedule {
  readonly steps: readonly Step[];
  readonly replicas: number;
  readonly cap: number;
  readonly variant: number;
  /** Seeds the random source `earlyRefresh` draws from, so a schedule replays exactly. */
  readonly seed: number;
}

/** The arbitrary of schedules for `target`. */
export function scheduleArbitrary<C>(target: ScheduleTarget<C>, maxSteps = 50): fc.Arbitrary<Schedule> {
  return fc.integer({ min: 1, max: target.maxReplicas }).chain((replicas) =>
    fc.record({
      steps: fc.array(stepArbitrary(target.durations, replicas, target.lock, target.tags === true), {
        minLength: 1,
        maxLength: maxSteps,
        size: 'max',
      }),
      replicas: fc.constant(replicas),
      cap: fc.integer({ min: 0, max: 3 }),
      variant: fc.integer({ min: 0, max: 7 }),
      seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    }),
  );
}

/** mulberry32: a small seeded generator of uniform numbers in [0, 1). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Fails the schedule with `message` (fast-check shrinks and reports it). */
function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

interface Produced {
  readonly key: Key;
  /** When the fill function was called, or the setValue started (step order, and `Date.now()`). */
  readonly at: number;
  readonly date: number;
  /**
   * When a caller first received it. From then on its flight has ended, unless its write is still
   * on its way (see `ScheduleTarget.joinsWritingFlights`).
   */
  deliveredAt: number | undefined;
  /** The replica whose fill produced it (`undefined` for a setValue's value). */
  readonly replica: number | undefined;
  /** Written with the key's tags (by getOrComputeWith or setValue on a tags target). */
  readonly tagged: boolean;
}

interface Write {
  readonly kind: WriteKind;
  readonly replica: number;
  readonly key: Key;
  readonly startedAt: number;
  readonly endedAt: number;
  /** `Date.now()` when it started, and (setValue) how long its value stays fresh. */
  readonly date: number;
  readonly ttl: number | undefined;
}

/**
 * Whether `write`, the latest write of a key, forbids serving a value produced before it to a caller
 * that started after the write resolved and had its answer at `date` (`Date.now()`). A store can
 * refuse an older fill's write only while it holds something newer: a delete's tombstone, or a
 * setValue's entry while it lives. So an invalidation, a delete or a setValue without ttl forbid it
 * for good; a setValue with a ttl forbids it while its value is fresh, and after that only a value
 * that was served before the write (the old value it replaced, which is never written again). A
 * fill that was still running elsewhere may land once the set value has expired, as on any empty
 * key, and a caller whose read reached the store after that (a slow read) may get it: so the set
 * value's freshness is judged when the caller has its answer, not when it started.
 *
 * Stores order a fill's write against a delete or a newer write by their start in whole
 * milliseconds, so a value produced in the same millisecond as the write is not judged (the
 * schedule leaves a millisecond on each side of a write, so that is rare).
 */
function forbids(write: Write, origin: Produced, date: number, slack: number): boolean {
  if (origin.at >= write.startedAt || origin.date >= write.date - slack) return false;
  // A tag concerns only the values written with it (plain getOrCompute writes none).
  if (write.kind === 'tag') return origin.tagged;
  if (write.kind !== 'set' || write.ttl === undefined || date < write.date + write.ttl) return true;
  return origin.deliveredAt !== undefined && origin.deliveredAt < write.startedAt;
}

/** The latest write of `key` that started before step `at`, if it has also resolved by then. */
function latestWrite(writes: readonly Write[], key: Key, at: number): Write | undefined {
  let latest: Write | undefined;
  for (const write of writes) if (write.key === key && write.startedAt < at) latest = write;
  return latest !== undefined && latest.endedAt < at ? latest : undefined;
}

const sum = (table: Record<string, object>, names: readonly string[], stat: string): number =>
  names.reduce(
    (total, name) => total + ((table[name] as Record<string, number> | undefined)?.[stat] ?? 0),
    0,
  );

/** Runs one schedule against `target` and checks every invariant; throws on the first broken one. */
export async function runSchedule<C>(target: ScheduleTarget<C>, schedule: Schedule): Promise<void> {
  const { api } = target;
  await target.before?.();
  const replicas = await target.replicas(schedule.replicas, schedule.variant);
  try {
    api.configure({ maxBackgroundRefreshes: schedule.cap, random: seeded(schedule.seed) });
    await runSteps(target, schedule, replicas);
  } finally {
    api.configure({ maxBackgroundRefreshes: 64, random: Math.random });
    await replicas.close?.();
    await target.after?.();
  }
}

async function runSteps<C>(target: ScheduleTarget<C>, schedule: Schedule, replicas: ScheduleReplicas<C>) {
  const { api, clock, durations } = target;
  const { caches, names } = replicas;
  let now = 0;
  const tick = (): number => ++now;
  const produced = new Map<string, Produced>();
  const writes: Write[] = [];
  // Per replica and key: the fills that could still write (single-flight: never two at once). An
  // invalidate or setValue supersedes the flights in flight there: a fill of one of those may still
  // run (after a lock wait) but is never written, so only calls started since count.
  const live = caches.map(() => ({ a: new Set<number>(), b: new Set<number>() }));
  const era = caches.map(() => ({ a: 0, b: 0 }));
  // The same for tag invalidations, which supersede only the tagged fills.
  const taggedFills = new Set<number>();
  const tagEra = caches.map(() => ({ a: 0, b: 0 }));
  const tagsOf = (key: Key): readonly string[] => [`t-${key}`, 'all'];
  const tags = target.tags === true;
  // Whether a fail-safe call of the key has been made on the replica: from then on a fill in flight
  // there may answer (and be joined by calls without fail-safe) with the fallback it read.
  const failSafeSeen = caches.map(() => ({ a: false, b: false }));
  const hung: (() => void)[] = [];
  const work: Promise<unknown>[] = [];
  const outcomes: Promise<void>[] = [];
  const failures: string[] = [];
  let nextId = 0;
  let calls = 0;
  let settled = 0;

  // Awaits `promise` while time passes (under fake timers a store's delayed answer needs it).
  const during = async <T>(promise: Promise<T> | T): Promise<T> => {
    let done = false;
    const tracked = Promise.resolve(promise).finally(() => {
      done = true;
    });
    for (let round = 0; round < 20 && !done; round++) await Promise.resolve();
    for (let waited = 0; !done && waited < 10_000; waited++) await clock.advance(1);
    return tracked;
  };

  const failSafe = {
    maxStale: durations.maxStale ?? 3 * (durations.ttl + durations.grace),
    throttle: durations.throttle ?? durations.ttl,
  };
  const options = {
    lockTtl: durations.lockTtl,
    lockWaitTimeout: durations.lockWaitTimeout,
    lockPollInterval: durations.lockPollInterval,
    waitUntil: (promise: Promise<unknown>) => void work.push(promise),
  };

  for (const step of schedule.steps) {
    if (step.type === 'advance') {
      await clock.advance(step.ms);
      continue;
    }
    const cache = caches[step.replica] as C;
    if (step.type === 'write') {
      // A millisecond on each side: stores order writes by their start time in whole milliseconds,
      // so a fill that started in the same millisecond as a delete could not be told apart from it.
      await clock.advance(1);
      const startedAt = tick();
      const date = Date.now();
      const affected: readonly Key[] = step.kind === 'tag' && step.all === true ? ['a', 'b'] : [step.key];
      // The replicas whose fills in flight the write supersedes. A `delete` goes to the store alone
      // (not through the core), so it supersedes nothing on its own replica.
      for (let reached = 0; reached < caches.length; reached++) {
        if (reached !== step.replica && target.writesReachEveryReplica !== true) continue;
        if (step.kind === 'tag') {
          for (const key of affected) {
            const lives = live[reached]?.[key] as Set<number>;
            for (const id of lives) if (taggedFills.has(id)) lives.delete(id);
            (tagEra[reached] as { a: number; b: number })[key]++;
          }
        } else if (step.kind !== 'delete' || reached !== step.replica) {
          live[reached]?.[step.key].clear();
          (era[reached] as { a: number; b: number })[step.key]++;
        }
      }
      try {
        if (step.kind === 'tag') {
          const tag = step.all === true ? 'all' : `t-${step.key}`;
          // biome-ignore lint/style/noNonNullAssertion: tag steps are only generated for tags targets
          await during(api.invalidateTag!(cache, tag));
        } else if (step.kind === 'invalidate') await during(api.invalidate(cache, step.key));
        else if (step.kind === 'delete') await during(replicas.remove(cache, step.key));
        else {
          const value = `${step.key}#set${nextId++}`;
          produced.set(value, {
            key: step.key,
            at: startedAt,
            date,
            deliveredAt: undefined,
            tagged: tags,
            replica: undefined,
          });
          const ttl = step.ttl === undefined ? {} : { ttl: step.ttl };
          await during(api.setValue(cache, step.key, value, tags ? { ...ttl, tags: tagsOf(step.key) } : ttl));
        }
      } catch (error) {
        failures.push(`${step.kind} ${step.key} failed: ${String(error)}`);
      }
      const endedAt = tick();
      for (const key of affected) {
        writes.push({
          kind: step.kind,
          replica: step.replica,
          key,
          startedAt,
          endedAt,
          date,
          ttl: step.kind === 'set' ? step.ttl : undefined,
        });
      }
      await clock.advance(1);
      continue;
    }

    calls++;
    const failSafeBefore = (failSafeSeen[step.replica] as { a: boolean; b: boolean })[step.key];
    if (step.failSafe) (failSafeSeen[step.replica] as { a: boolean; b: boolean })[step.key] = true;
    const startedAt = tick();
    const { key, replica } = step;
    // A fill of this replica still registered (writing, on a remote cache) may answer this call.
    const joinable = target.joinsWritingFlights === true && api.inFlightCount(cache) !== 0;
    const lives = live[replica]?.[key] as Set<number>;
    const eras = era[replica] as { a: number; b: number };
    const startEra = eras[key];
    const tagEras = tagEra[replica] as { a: number; b: number };
    const startTagEra = tagEras[key];
    const tagged = tags && step.with;
    const controller = step.abortAfter === undefined ? undefined : new AbortController();
    if (controller !== undefined) setTimeout(() => controller.abort(new Error('left')), step.abortAfter);
    const fill = (context?: FillInfo): Promise<string> => {
      const id = nextId++;
      const value = `${key}#${id}`;
      produced.set(value, { key, at: tick(), date: Date.now(), deliveredAt: undefined, tagged, replica });
      if (tagged) taggedFills.add(id);
      if (startEra === eras[key] && (!tagged || startTagEra === tagEras[key])) {
        lives.add(id);
        if (lives.size > 1) failures.push(`replica ${replica} ran two fills of '${key}' at once`);
      }
      const done = (): void => void lives.delete(id);
      context?.signal.addEventListener('abort', done, { once: true });
      return new Promise<string>((resolve, reject) => {
        const fail = (): void => {
          done();
          reject(new Error(`fill ${value} failed`));
        };
        if (step.fill === 'hang') {
          hung.push(fail);
          return;
        }
        setTimeout(() => {
          if (step.fill === 'ok') {
            done();
            resolve(value);
          } else fail();
        }, step.fillMs);
      });
    };
    const answer = step.with
      ? api.getOrComputeWith(
          cache,
          key,
          {
            ...options,
            ttl: durations.ttl,
            staleWhileRevalidate: step.swr ? durations.grace : undefined,
            earlyRefresh: step.early ? { beta: 4 } : undefined,
            distributedFillLock: step.lock,
            fillTimeout: step.fillTimeout,
            signal: controller?.signal,
            ...(tagged ? { tags: tagsOf(key) } : {}),
            failSafe: step.failSafe ? failSafe : undefined,
            softTimeout: step.softTimeout,
          },
          fill,
        )
      : api.getOrCompute(cache, key, durations.ttl, fill);
    outcomes.push(
      answer.then(
        (value) => {
          settled++;
          const endedAt = tick();
          const origin = typeof value === 'string' ? produced.get(value) : undefined;
          if (origin === undefined || origin.key !== key) {
            failures.push(`a caller of '${key}' got ${String(value)}, which no fill of '${key}' produced`);
            return;
          }
          const write = latestWrite(writes, key, startedAt);
          if (write !== undefined && forbids(write, origin, Date.now(), target.orderingSlackMs ?? 0)) {
            // An older value after a newer write: on the writer's replica, whatever its source
            // (invalidate and setValue supersede the fills in flight there); on any replica, when the
            // value's flight had already ended, so it can only have come from the store. (Another
            // replica's fill in flight still answers the callers that join it there, and on a plain
            // remote cache so does one that answered and is still writing, see joinsWritingFlights.) With fail-safe
            // a value delivered before can also be such a fill's answer (its fallback, read before
            // the write, after a soft timeout; another replica's write cannot reach it), so once a
            // fail-safe call of the key was made on this replica only the writer's replica is
            // checked here; the store itself is checked at the end.
            const sameReplica =
              write.replica === replica ? write.kind !== 'delete' : target.writesReachEveryReplica === true;
            const fromStore =
              !(step.failSafe || failSafeBefore) &&
              origin.deliveredAt !== undefined &&
              origin.deliveredAt < startedAt &&
              !(joinable && origin.replica === replica);
            if (sameReplica || fromStore) {
              failures.push(
                `a caller of '${key}' on replica ${replica} that started after ${write.kind} on replica ${write.replica} resolved got ${String(value)}, produced before it`,
              );
            }
          }
          origin.deliveredAt ??= endedAt;
        },
        (error: unknown) => {
          settled++;
          const left = error instanceof Error && error.message === 'left';
          if (!left && !api.isCacheFillError(error)) {
            failures.push(`a caller of '${key}' got an unexpected error: ${String(error)}`);
          }
        },
      ),
    );
  }

  // Every caller is bounded: a lock wait by lockWaitTimeout, a fill by its duration or fillTimeout.
  const bound = durations.lockWaitTimeout + durations.fillMs + durations.fillTimeout + durations.abortAfter;
  for (let waited = 0; waited < 4 * bound && settled < calls; waited += bound / 4) {
    await clock.advance(bound / 4);
  }
  check(settled === calls, `${calls - settled} of ${calls} callers still wait after ${4 * bound}ms`);
  // The fills that never settle end now (and any that a flight still starts, after a lock wait),
  // so that their flights' remaining work (a write, a release) can finish and every flight has
  // been counted.
  // Work handed over meanwhile (a fail-safe re-arm after a fillTimeout) is watched as it comes.
  let finished = 0;
  let watched = 0;
  const watchWork = (): void => {
    for (; watched < work.length; watched++) void work[watched]?.finally(() => finished++);
  };
  watchWork();
  for (let waited = 0; waited < 4 * bound && finished < work.length; waited += bound / 4) {
    for (const fail of hung.splice(0)) fail();
    await clock.advance(bound / 4);
    watchWork();
  }
  check(finished === work.length, `${work.length - finished} flights still run after every caller left`);
  await Promise.all(outcomes);
  check(failures.length === 0, failures.join('\n'));

  // A flight stays registered until its write has landed, after its callers have their value; a
  // plain `getOrCompute` hands that write to no `waitUntil`, so it is waited for here (as long as the
  // work above, on a loaded machine a Redis write can trail its callers): a flight that never leaves
  // still fails the check.
  const busy = (): boolean => caches.some((cache) => api.inFlightCount(cache) !== 0);
  for (let waited = 0; waited < 4 * bound && busy(); waited += bound / 4) await clock.advance(bound / 4);
  for (const [index, cache] of caches.entries()) {
    check(api.inFlightCount(cache) === 0, `replica ${index} still has fills in flight`);
  }
  // What the store holds at the end must not be older than a write that forbids it.
  for (const key of ['a', 'b'] as const) {
    for (const [index, cache] of caches.entries()) {
      const value = await during(api.getValue(cache, key));
      if (value === undefined) continue;
      const origin = produced.get(value as string);
      check(
        origin !== undefined,
        `replica ${index} reads ${String(value)} for '${key}', which nothing produced`,
      );
      const last = latestWrite(writes, key, tick());
      check(
        last === undefined || !forbids(last, origin, Date.now(), target.orderingSlackMs ?? 0),
        `replica ${index} reads ${String(value)} for '${key}' at the end, older than the last ${last?.kind}`,
      );
    }
  }

  const table = api.statsByCache();
  const counted = [
    'hits',
    'staleHits',
    'misses',
    'abortedReads',
    'coalescedWaits',
    'fills',
    'lockWaitHits',
    'fillsCancelled',
    'fillFailures',
    'fillTimeouts',
    'backgroundRefreshes',
    'backgroundRefreshFailures',
    'backgroundRefreshesSkipped',
    'earlyRefreshes',
    'earlyRefreshesSkipped',
    'lockContended',
    'lockWaitTimeouts',
    'lockWaitErrors',
    'backendErrors',
    'failSafeActivations',
    'softTimeouts',
  ] as const;
  const counts = {} as Record<(typeof counted)[number], number>;
  for (const name of counted) counts[name] = sum(table, names, name);
  const c = counts;
  const shown = JSON.stringify(counts);
  check(
    c.hits + c.staleHits + c.misses + c.abortedReads === calls,
    `hits + staleHits + misses + abortedReads !== ${calls} calls: ${shown}`,
  );
  check(
    c.misses - c.coalescedWaits + c.backgroundRefreshes + c.earlyRefreshes ===
      c.fills + c.lockWaitHits + c.fillsCancelled,
    `misses - coalescedWaits + backgroundRefreshes + earlyRefreshes !== fills + lockWaitHits + fillsCancelled: ${shown}`,
  );
  check(
    c.fillFailures + c.fillTimeouts <= c.fills + c.fillsCancelled,
    `fillFailures + fillTimeouts > fills + fillsCancelled: ${shown}`,
  );
  check(
    c.backgroundRefreshFailures <= c.backgroundRefreshes + c.earlyRefreshes,
    `backgroundRefreshFailures > backgroundRefreshes + earlyRefreshes: ${shown}`,
  );
  check(
    c.earlyRefreshes + c.earlyRefreshesSkipped <= c.hits,
    `earlyRefreshes + earlyRefreshesSkipped > hits: ${shown}`,
  );
  check(
    c.backgroundRefreshes + c.backgroundRefreshesSkipped <= c.staleHits,
    `backgroundRefreshes + backgroundRefreshesSkipped > staleHits: ${shown}`,
  );
  check(
    c.lockWaitTimeouts + c.lockWaitErrors <= c.lockContended,
    `lockWaitTimeouts + lockWaitErrors > lockContended: ${shown}`,
  );
  check(c.lockWaitErrors <= c.backendErrors, `lockWaitErrors > backendErrors: ${shown}`);
  check(
    c.failSafeActivations <= c.fillFailures + c.fillTimeouts,
    `failSafeActivations > fillFailures + fillTimeouts: ${shown}`,
  );
  check(c.softTimeouts <= c.misses - c.coalescedWaits, `softTimeouts > misses - coalescedWaits: ${shown}`);
}
