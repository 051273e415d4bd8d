import { onStampedeEvent, type StampedeEvent } from '@stampede/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createServerAccess,
  createSlowReadWatch,
  evictionRisk,
  isPermissionError,
  SLOW_READ_STREAK,
} from '../src/index.js';

const events: StampedeEvent[] = [];
let off: () => void = () => {};
beforeEach(() => {
  events.length = 0;
  off = onStampedeEvent((event) => events.push(event));
  vi.spyOn(console, 'warn').mockImplementation(() => {});
});
afterEach(() => {
  off();
  vi.restoreAllMocks();
});

describe('evictionRisk', () => {
  it('is a risk for every policy that may evict, once maxmemory is set', () => {
    for (const policy of [
      'allkeys-lru',
      'allkeys-lfu',
      'allkeys-random',
      'volatile-lru',
      'volatile-lfu',
      'volatile-random',
      'volatile-ttl',
    ]) {
      expect(evictionRisk({ maxmemory: '2097152', 'maxmemory-policy': policy })).toBe(
        `maxmemory-policy ${policy} with maxmemory 2097152`,
      );
    }
  });

  it('is none for noeviction, for no maxmemory (0), or when the server did not say', () => {
    expect(evictionRisk({ maxmemory: '2097152', 'maxmemory-policy': 'noeviction' })).toBeUndefined();
    expect(evictionRisk({ maxmemory: '0', 'maxmemory-policy': 'allkeys-lru' })).toBeUndefined();
    expect(evictionRisk({})).toBeUndefined();
  });
});

describe('isPermissionError', () => {
  it("knows Redis's refusals, sent directly or from inside a script", () => {
    expect(
      isPermissionError(new Error("NOPERM this user has no permissions to run the 'evalsha' command")),
    ).toBe(true);
    expect(
      isPermissionError(
        new Error(
          "ERR The user executing the script can't run this command or subcommand script: abc, on @user_script:5.",
        ),
      ),
    ).toBe(true);
    expect(isPermissionError(new Error('NOSCRIPT No matching script'))).toBe(false);
    expect(isPermissionError(new Error('Connection is closed.'))).toBe(false);
    expect(isPermissionError(undefined)).toBe(false);
  });
});

describe('createServerAccess', () => {
  it('turns scripts off on the first refusal only, with one warning; other faults change nothing', () => {
    const access = createServerAccess('access-test');
    access.scriptFailed(new Error('Connection is closed.'));
    expect(access.scripts).toBe(true);
    access.scriptFailed(new Error("NOPERM this user has no permissions to run the 'eval' command"));
    access.scriptFailed(new Error("NOPERM this user has no permissions to run the 'evalsha' command"));
    expect(access.scripts).toBe(false);
    expect(access.publish).toBe(true);
    access.publishRefused(new Error('NOPERM'));
    access.publishRefused(new Error('NOPERM'));
    expect(access.publish).toBe(false);
    expect(events.map((event) => event.type === 'warning' && event.cache)).toEqual([
      'access-test',
      'access-test',
    ]);
    expect(console.warn).toHaveBeenCalledTimes(2);
  });
});

describe('createSlowReadWatch', () => {
  it(`warns once, after ${SLOW_READ_STREAK} late reads in a row of one key`, () => {
    const watch = createSlowReadWatch('slow-test', 20);
    watch.late('a', 'x'.repeat(2_048), 30);
    watch.late('a', 'x'.repeat(2_048), 31);
    watch.answered('a');
    watch.late('a', 'x'.repeat(2_048), 32);
    watch.late('b', 'x', 33);
    watch.late('a', 'x'.repeat(2_048), 34);
    expect(events).toEqual([]);
    watch.late('a', 'x'.repeat(2_048), 35);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'warning', cache: 'slow-test' });
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(/'a'.*35 ms for 2\.0 kB/);
    for (let i = 0; i < 5; i++) watch.late('b', 'x', 40);
    expect(events).toHaveLength(1);
  });
});
