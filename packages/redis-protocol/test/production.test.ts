import { onStampedeEvent, type StampedeEvent } from '@stampede/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createChannelRefusalWatch,
  createOperationRunner,
  createRefusedWriteWatch,
  createServerAccess,
  createSlowReadWatch,
  createUndecodableWatch,
  evictionRisk,
  isAuxiliaryRefusal,
  isMovedReply,
  isPermissionError,
  isScriptingUnavailable,
  isServerRefusal,
  isSubscriberModeError,
  REFUSED_WRITE_STREAK,
  RedisProtocolError,
  redactServerEcho,
  SLOW_READ_STREAK,
  UNDECODABLE_STREAK,
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

describe('isAuxiliaryRefusal', () => {
  // Replies of Redis 7.0 (as a user without the command sees them) and of 7.2 on, which names the
  // command refused inside a script.
  const evalsha = new Error("NOPERM this user has no permissions to run the 'evalsha' command");
  const inScript = new Error(
    "ERR The user executing the script can't run this command or subcommand script: 104ae65d, on @user_script:1.",
  );
  const timeNamed = new Error(
    "NOPERM User u has no permissions to run the 'time' command script: 104ae65d, on @user_script:1.",
  );
  const keyInScript = new Error(
    "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: b0859784, on @user_script:1.",
  );
  const keyDirect = new Error(
    'NOPERM this user has no permissions to access one of the keys used as arguments',
  );

  it("is the script's own command only when the refusal came from inside the script and names it, or names none", () => {
    expect(isAuxiliaryRefusal(inScript, 'TIME')).toBe(true);
    expect(isAuxiliaryRefusal(timeNamed, 'TIME')).toBe(true);
    expect(isAuxiliaryRefusal(timeNamed, 'PEXPIRE')).toBe(false);
  });

  it('is not for a refusal of EVALSHA itself, of a key, or for a fault', () => {
    for (const error of [evalsha, keyInScript, keyDirect, new Error('Connection is closed.'), undefined]) {
      expect(isAuxiliaryRefusal(error, 'TIME')).toBe(false);
      expect(isAuxiliaryRefusal(error, 'PEXPIRE')).toBe(false);
    }
  });
});

describe('createServerAccess', () => {
  it('a refused TIME or PEXPIRE: one warning each, scripting stays on', () => {
    const access = createServerAccess('auxiliary-test');
    const inScript = new Error("ERR The user executing the script can't run this command or subcommand");
    access.auxiliaryFailed('TIME', new Error('Connection is closed.'));
    expect(events).toEqual([]);
    access.auxiliaryFailed('TIME', inScript);
    access.auxiliaryFailed('TIME', inScript);
    access.auxiliaryFailed('PEXPIRE', inScript);
    access.auxiliaryFailed('PEXPIRE', inScript);
    expect(access.scripts).toBe(true);
    const messages = events.map((event) => (event.type === 'warning' ? event.message : ''));
    expect(messages).toHaveLength(2);
    expect(messages[0]).toMatch(/refused TIME to cache 'auxiliary-test'.*own clock/);
    expect(messages[1]).toMatch(/refused to extend a fill lock of cache 'auxiliary-test'.*\+pexpire/);
  });

  it('a refused PTTL (reported by the delete and the extension scripts): one warning naming the delete it may undo', () => {
    const access = createServerAccess('pttl-test');
    const refusal = new Error("ERR The user executing the script can't run this command or subcommand");
    access.auxiliaryFailed('PTTL', refusal);
    access.auxiliaryFailed('PTTL', refusal);
    expect(access.scripts).toBe(true);
    const messages = events.map((event) => (event.type === 'warning' ? event.message : ''));
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(
      /refused PTTL to cache 'pttl-test'.*tombstoneTtl.*undoing the delete.*\+pttl/,
    );
  });

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

describe('isServerRefusal', () => {
  it('is true for error replies that refuse a write, whatever the client', () => {
    for (const message of [
      "OOM command not allowed when used memory > 'maxmemory'.",
      "OOM command not allowed when used memory > 'maxmemory'. script: f00c, on @user_script:18.",
      'MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk.',
      "READONLY You can't write against a read only replica.",
      'ERR max request size exceeded, command was: ["evalsha","..."]',
      'ERR Error running script (call to f_1): @user_script:18: -OOM command not allowed',
    ]) {
      expect(isServerRefusal(new Error(message)), message).toBe(true);
    }
  });

  it('is false for time-outs, lost connections, passing replies and ACL refusals', () => {
    for (const message of [
      'redis set did not answer within 1000ms',
      "Stream isn't writeable and enableOfflineQueue options is false",
      'Connection is closed.',
      'connect ECONNREFUSED 127.0.0.1:6379',
      'fetch failed',
      'injected fault: internal server error',
      'NOSCRIPT No matching script. Please use EVAL.',
      'MOVED 3999 127.0.0.1:6381',
      'TRYAGAIN Multiple keys request during rehashing of slot',
      'CLUSTERDOWN The cluster is down',
      'LOADING Redis is loading the dataset in memory',
      'BUSY Redis is busy running a script.',
      'MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no.',
      "NOPERM this user has no permissions to run the 'evalsha' command",
      "ERR The user executing the script can't run this command or subcommand",
    ]) {
      expect(isServerRefusal(new Error(message)), message).toBe(false);
    }
    expect(isServerRefusal(undefined)).toBe(false);
  });
});

describe('createRefusedWriteWatch', () => {
  const oom = new Error("OOM command not allowed when used memory > 'maxmemory'.");

  it(`warns once, after ${REFUSED_WRITE_STREAK} refused writes in a row of one key`, () => {
    const watch = createRefusedWriteWatch('refused-test');
    watch.refused('a', oom);
    watch.refused('a', oom);
    watch.written('a');
    watch.refused('a', oom);
    watch.refused('b', oom);
    // Not refusals: neither end a streak nor add to it.
    watch.refused('a', new Error('redis set did not answer within 1000ms'));
    watch.refused('a', new Error('Connection is closed.'));
    watch.refused('a', oom);
    expect(events).toEqual([]);
    watch.refused('a', oom);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'warning', cache: 'refused-test' });
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /refused 3 writes in a row of 'a' in cache 'refused-test' \(OOM command not allowed/,
    );
    for (let i = 0; i < 5; i++) watch.refused('b', oom);
    expect(events).toHaveLength(1);
  });

  it("gives the server's reply without what the client appends (the command, value included)", () => {
    const watch = createRefusedWriteWatch('refused-upstash');
    const secret = 'v'.repeat(1_000);
    const error = new Error(
      `ERR max request size exceeded, command was: ["evalsha","1",["k"],["${secret}"]]`,
    );
    for (let i = 0; i < REFUSED_WRITE_STREAK; i++) watch.refused('k', error);
    const message = events[0]?.type === 'warning' ? events[0].message : '';
    expect(message).toContain("'k' in cache 'refused-upstash' (ERR max request size exceeded)");
    expect(message).not.toContain('command was');
    expect(message).not.toContain('vvvv');
  });

  it('values that cannot be serialised: their own streak and warning, ended by a write', () => {
    const watch = createRefusedWriteWatch('unserialisable-test');
    const bigint = new Error("cannot serialise the value of 'a' (not stored)", {
      cause: new TypeError('Do not know how to serialize a BigInt'),
    });
    watch.unserialisable('a', bigint);
    watch.unserialisable('a', bigint);
    watch.written('a');
    watch.unserialisable('a', bigint);
    // A refusal is another streak.
    watch.refused('a', oom);
    watch.unserialisable('a', bigint);
    expect(events).toEqual([]);
    watch.unserialisable('a', bigint);
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /3 values in a row of 'a' in cache 'unserialisable-test' could not be serialised \(Do not know how to serialize a BigInt\)/,
    );
    for (let i = 0; i < 3; i++) watch.refused('a', oom);
    expect(events).toHaveLength(2);
  });

  it('the operation runner watches writes and commits, not reads', async () => {
    const runner = createOperationRunner({
      name: 'refused-runner',
      label: 'redis',
      operationTimeout: 1_000,
      createError: (code, message, options) => new RedisProtocolError(code, message, options),
    });
    const refuse = () => Promise.reject(oom);
    for (let i = 0; i < REFUSED_WRITE_STREAK; i++) await runner.call('get', 'k', refuse).catch(() => {});
    await runner.call('set', 'k', refuse).catch(() => {});
    await runner.call('commit', 'k', refuse).catch(() => {});
    // An answered write ends the streak.
    await runner.call('set', 'k', () => Promise.resolve(1));
    await runner.call('set', 'k', refuse).catch(() => {});
    await runner.call('commit', 'k', refuse).catch(() => {});
    expect(events).toEqual([]);
    await expect(runner.call('set', 'k', refuse)).rejects.toBe(oom);
    expect(events).toHaveLength(1);
  });
});

describe('a server without EVAL/EVALSHA, and the arguments Redis echoes', () => {
  it('isScriptingUnavailable: EVAL or EVALSHA unknown (Redis 7 and Redis 6 quoting), nothing else', () => {
    for (const message of [
      "ERR unknown command 'evalsha', with args beginning with: 'abc' '1' ",
      'ERR unknown command `EVAL`, with args beginning with: ',
      "ERR unknown command 'evalsha_ro', with args beginning with: ",
    ]) {
      expect(isScriptingUnavailable(new Error(message))).toBe(true);
    }
    for (const message of [
      "ERR unknown command 'config', with args beginning with: 'GET' ",
      'NOPERM eval',
      'OOM',
    ]) {
      expect(isScriptingUnavailable(new Error(message))).toBe(false);
    }
  });

  it('redactServerEcho cuts the echoed arguments from message and stack, keeps a client suffix, and is idempotent', () => {
    const echoed =
      "ERR unknown command 'evalsha', with args beginning with: 'f00c' '1' 'p:{k}' 's2|1|2|3|4|{\"ssn\":\"123-45' ";
    const error = new Error(echoed);
    expect(redactServerEcho(error)).toBe(error);
    expect(error.message).toBe("ERR unknown command 'evalsha', with args beginning with: [redacted]");
    expect(error.stack).not.toMatch(/ssn/);
    expect(redactServerEcho(error)).toBe(error);
    expect(error.message).toBe("ERR unknown command 'evalsha', with args beginning with: [redacted]");
    const upstash = new Error(`${echoed}, command was: ["evalsha","f00c"]`);
    redactServerEcho(upstash);
    expect(upstash.message).toBe(
      'ERR unknown command \'evalsha\', with args beginning with: [redacted], command was: ["evalsha","f00c"]',
    );
    const plain = new Error('OOM command not allowed');
    redactServerEcho(plain);
    expect(plain.message).toBe('OOM command not allowed');
    expect(redactServerEcho('text')).toBe('text');
  });
});

describe('createUndecodableWatch', () => {
  const bad = new RedisProtocolError('E_STAMPEDE_BACKEND_DECODE', "cannot decode the entry of 'a'", {
    cause: new SyntaxError('Unexpected token'),
  });

  it('warns once, at the third undecodable read of one key in a row, naming the key and the cause', () => {
    const watch = createUndecodableWatch('decode-test');
    for (let i = 0; i < UNDECODABLE_STREAK - 1; i++) watch.undecodable('a', bad);
    // A good read of the key ends its streak; another key's failures are no part of it.
    watch.decoded('a');
    watch.undecodable('b', bad);
    for (let i = 0; i < UNDECODABLE_STREAK - 1; i++) watch.undecodable('a', bad);
    expect(events).toEqual([]);
    watch.undecodable('a', bad);
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /the entry of 'a' in cache 'decode-test' could not be decoded 3 reads in a row \(Unexpected token\)/,
    );
    for (let i = 0; i < UNDECODABLE_STREAK; i++) watch.undecodable('b', bad);
    expect(events).toHaveLength(1);
  });
});

describe('a MOVED reply to a client that is not a Cluster client', () => {
  const moved = new Error('MOVED 8579 127.0.0.1:7001');

  it('isMovedReply: a MOVED redirection only', () => {
    expect(isMovedReply(moved)).toBe(true);
    for (const other of [
      'ASK 8579 127.0.0.1:7001',
      'CLUSTERDOWN The cluster is down',
      'ERR MOVED',
      'moved',
    ]) {
      expect(isMovedReply(new Error(other))).toBe(false);
    }
    expect(isMovedReply('MOVED 1 a:1')).toBe(false);
  });

  const runner = (name: string, cluster?: boolean) =>
    createOperationRunner({
      name,
      label: 'redis',
      operationTimeout: 1_000,
      createError: (code, message, options) => new RedisProtocolError(code, message, options),
      cluster,
    });

  it('warns once for the cache (the reply, what it breaks, the fix), and the error still reaches the caller', async () => {
    const plain = runner('moved-plain');
    for (const operation of ['get', 'lock', 'set', 'get']) {
      await expect(plain.call(operation, 'k', () => Promise.reject(moved))).rejects.toBe(moved);
    }
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /Redis answered MOVED 8579 127\.0\.0\.1:7001 to cache 'moved-plain': its client is connected to one node of a Redis Cluster but is not a Cluster client.*Pass an ioredis Cluster/,
    );
  });

  it('a client in subscriber mode (ioredis): one warning for the cache, whatever the operation', async () => {
    const subscribed = new Error('Connection in subscriber mode, only subscriber commands may be used');
    expect(isSubscriberModeError(subscribed)).toBe(true);
    expect(isSubscriberModeError(new Error('ERR Connection in subscriber mode'))).toBe(false);
    const plain = runner('subscriber-mode');
    for (const operation of ['warm-up', 'get', 'set']) {
      await expect(plain.call(operation, 'k', () => Promise.reject(subscribed))).rejects.toBe(subscribed);
    }
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /subscriber mode.*client\.duplicate\(\)/,
    );
  });

  it('says nothing for a Cluster client (it follows MOVED itself; one that surfaces is transient)', async () => {
    const cluster = runner('moved-cluster', true);
    await expect(cluster.call('get', 'k', () => Promise.reject(moved))).rejects.toBe(moved);
    expect(events).toEqual([]);
  });
});

describe('createChannelRefusalWatch', () => {
  it('one warning per kind, for permission refusals only', () => {
    const watch = createChannelRefusalWatch('channels-test');
    watch.failed('subscribe', new Error('Connection is closed.'));
    watch.failed('publish', new Error('redis publish did not answer within 1000ms'));
    expect(events).toEqual([]);
    const noperm = new Error(
      'NOPERM this user has no permissions to access one of the channels used as arguments',
    );
    watch.failed('subscribe', noperm);
    watch.failed('subscribe', noperm);
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'warning' && events[0].message).toMatch(
      /refused to SUBSCRIBE for cache 'channels-test' \(NOPERM/,
    );
    watch.failed('publish', noperm);
    watch.failed('publish', noperm);
    expect(events).toHaveLength(2);
    expect(events[1]?.type === 'warning' && events[1].message).toMatch(/PUBLISH on the invalidation bus/);
  });

  it('the operation runner watches publish calls and reported subscribe faults', async () => {
    const runner = createOperationRunner({
      name: 'channels-runner',
      label: 'redis',
      operationTimeout: 1_000,
      createError: (code, message, options) => new RedisProtocolError(code, message, options),
    });
    const noperm = new Error(
      'NOPERM this user has no permissions to access one of the channels used as arguments',
    );
    await expect(runner.call('publish', undefined, () => Promise.reject(noperm))).rejects.toBe(noperm);
    runner.report('subscribe', 'k', noperm);
    expect(events.filter((event) => event.type === 'warning')).toHaveLength(2);
  });
});
