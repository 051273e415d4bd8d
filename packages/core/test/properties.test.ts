import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  configure,
  type GetOrComputeOptions,
  getOrComputeWith,
  inFlightCount,
  invalidate,
  resetStats,
  stats,
} from '../src/index.js';
import { testCache } from './helpers.js';

type Step =
  | {
      type: 'call';
      key: 'a' | 'b';
      fill: 'ok' | 'fail' | 'hang';
      fillMs: number;
      swr: boolean;
      fillTimeout: number;
      abortAfter: number | undefined;
    }
  | { type: 'advance'; ms: number }
  | { type: 'invalidate'; key: 'a' | 'b' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      type: fc.constant('call' as const),
      key: fc.constantFrom('a' as const, 'b' as const),
      fill: fc.constantFrom('ok' as const, 'ok' as const, 'fail' as const, 'hang' as const),
      fillMs: fc.integer({ min: 0, max: 300 }),
      swr: fc.boolean(),
      fillTimeout: fc.integer({ min: 1, max: 400 }),
      abortAfter: fc.option(fc.integer({ min: 1, max: 300 }), { nil: undefined }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ type: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 400 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('invalidate' as const),
      key: fc.constantFrom('a' as const, 'b' as const),
    }),
  },
);

afterEach(() => {
  configure({ maxBackgroundRefreshes: 64 });
  vi.useRealTimers();
});

describe('single-flight + SWR + abort + timeout + invalidation under random schedules', () => {
  it('keeps its invariants', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 60 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 3 }),
        async (steps, async, cap) => {
          vi.useFakeTimers({ now: 1_000_000 });
          configure({ maxBackgroundRefreshes: cap });
          resetStats();
          const cache = testCache({ async });
          // Fills whose result could still be written: never two at once for one key.
          const live = { a: new Set<number>(), b: new Set<number>() };
          const produced = new Set<string>();
          let nextFill = 0;
          let maxLive = 0;
          const outcomes: Promise<void>[] = [];
          let settledCount = 0;
          let calls = 0;

          for (const step of steps) {
            if (step.type === 'advance') {
              await vi.advanceTimersByTimeAsync(step.ms);
              continue;
            }
            if (step.type === 'invalidate') {
              live[step.key].clear();
              await invalidate(cache, step.key);
              continue;
            }
            calls++;
            const controller = step.abortAfter === undefined ? undefined : new AbortController();
            if (controller !== undefined)
              setTimeout(() => controller.abort(new Error('left')), step.abortAfter);
            const options: GetOrComputeOptions = {
              ttl: 100,
              staleWhileRevalidate: step.swr ? 200 : undefined,
              fillTimeout: step.fillTimeout,
              signal: controller?.signal,
            };
            const fill = ({ signal }: { signal: AbortSignal }) => {
              const id = nextFill++;
              const value = `${step.key}#${id}`;
              produced.add(value);
              live[step.key].add(id);
              maxLive = Math.max(maxLive, live[step.key].size);
              const done = () => live[step.key].delete(id);
              signal.addEventListener('abort', done, { once: true });
              return new Promise<string>((resolve, reject) => {
                if (step.fill === 'hang') return;
                setTimeout(() => {
                  done();
                  if (step.fill === 'ok') resolve(value);
                  else reject(new Error(`fail ${value}`));
                }, step.fillMs);
              });
            };
            outcomes.push(
              getOrComputeWith(cache, step.key, options, fill).then(
                (value) => {
                  settledCount++;
                  expect(produced.has(value)).toBe(true);
                  expect(value.startsWith(`${step.key}#`)).toBe(true);
                },
                () => {
                  settledCount++;
                },
              ),
            );
          }
          // Every flight has a fillTimeout (<= 400 ms) and every fill a duration (<= 300 ms).
          await vi.advanceTimersByTimeAsync(1_000);
          await Promise.all(outcomes);

          expect(settledCount).toBe(calls);
          expect(maxLive).toBeLessThanOrEqual(1);
          expect(inFlightCount(cache)).toBe(0);
          const s = stats();
          expect(s.hits + s.staleHits + s.misses).toBe(calls);
          expect(s.fills).toBe(s.misses - s.coalescedWaits + s.backgroundRefreshes);
          expect(s.fillFailures + s.fillTimeouts).toBeLessThanOrEqual(s.fills);
          expect(s.backgroundRefreshFailures).toBeLessThanOrEqual(s.backgroundRefreshes);
          vi.useRealTimers();
        },
      ),
      { numRuns: 150 },
    );
  });
});
