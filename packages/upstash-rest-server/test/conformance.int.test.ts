import { errors } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, post, startHarness } from './harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness('rest', { basePath: '/v2/db' });
});
afterAll(async () => {
  await h?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each([
  { autoPipelining: true, base64: true },
  { autoPipelining: false, base64: true },
  { autoPipelining: true, base64: false },
  { autoPipelining: false, base64: false },
])('with the real @upstash/redis client, %o', (mode) => {
  const client = () => h.client(mode);
  const key = (name: string) =>
    `${h.prefix}${mode.autoPipelining ? 'ap' : 'np'}-${mode.base64 ? 'b64' : 'utf'}:${name}`;

  it('1. set nx px answers OK then null, and the key expires after px', async () => {
    const redis = client();
    // A long px for the NX checks (a loaded machine must not let it lapse between two calls), then
    // a short one to see the expiry itself.
    expect(await redis.set(key('nx'), 'v', { nx: true, px: 5_000 })).toBe('OK');
    expect(await redis.set(key('nx'), 'w', { nx: true, px: 5_000 })).toBeNull();
    expect(await redis.get(key('nx'))).toBe('v');
    const left = await redis.pttl(key('nx'));
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(5_000);
    expect(await redis.set(key('short'), 'x', { nx: true, px: 50 })).toBe('OK');
    await sleep(300);
    expect(await redis.get(key('short'))).toBeNull();
  });

  it('2. get round-trips strings, numbers, objects and non-ASCII; a missing key is null', async () => {
    const redis = client();
    const values: unknown[] = ['plain', 42, -1.5, { a: [1, 'two', { three: null }] }, 'héllo 🚀, world'];
    for (const [i, value] of values.entries()) {
      await redis.set(key(`v${i}`), value);
      expect(await redis.get(key(`v${i}`))).toEqual(value);
    }
    expect(await redis.get(key('missing'))).toBeNull();
  });

  it('3. del of several keys returns the count; ping answers PONG', async () => {
    const redis = client();
    await Promise.all([redis.set(key('d1'), 1), redis.set(key('d2'), 2), redis.set(key('d3'), 3)]);
    expect(await redis.del(key('d1'), key('d2'), key('d3'), key('d4'))).toBe(3);
    expect(await redis.ping()).toBe('PONG');
  });

  it('4. an eval with nested arrays and a status reply decodes exactly', async () => {
    const redis = client();
    const script = "return {1, {2, 'x', {'héllo 🚀'}}, redis.status_reply('OK'), 'tail', ARGV[1]}";
    expect(await redis.eval(script, [], ['a,b'])).toEqual([1, [2, 'x', ['héllo 🚀']], 'OK', 'tail', 'a,b']);
  });

  it('5. a Redis error surfaces as an UpstashError with the Redis text', async () => {
    const redis = client();
    await redis.set(key('text'), 'not a number');
    const error = await redis.incr(key('text')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(errors.UpstashError);
    expect((error as Error).message).toContain('ERR value is not an integer or out of range');
  });

  it('6a. a pipeline with one failing command answers per item', async () => {
    const redis = client();
    const p = redis.pipeline();
    p.set(key('p'), 'text');
    p.incr(key('p'));
    p.get(key('p'));
    const results = await p.exec({ keepErrors: true });
    expect(results[0]).toEqual({ result: 'OK', error: undefined });
    expect(results[1]?.error).toContain('ERR value is not an integer');
    expect(results[2]).toEqual({ result: 'text', error: undefined });
  });

  it('6b. an error inside EXEC is a per-item error; wrong arity discards the transaction', async () => {
    const redis = client();
    const tx = redis.multi();
    tx.set(key('tx'), 'text');
    tx.incr(key('tx'));
    tx.get(key('tx'));
    const results = await tx.exec({ keepErrors: true });
    expect(results[0]?.result).toBe('OK');
    expect(results[1]?.error).toContain('ERR value is not an integer');
    expect(results[2]?.result).toBe('text');

    const aborted = redis.multi();
    aborted.set(key('tx2'), 'v');
    // biome-ignore lint/suspicious/noExplicitAny: sends a command with the wrong arity on purpose
    (aborted as any).get();
    const error = await aborted.exec().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(errors.UpstashError);
    expect((error as Error).message).toContain('EXECABORT');
    expect(await redis.get(key('tx2'))).toBeNull();
  });

  it('7. scriptLoad + evalsha work, and createScript falls back to EVAL after scriptFlush', async () => {
    const redis = client();
    const body = `return 'loaded ${mode.autoPipelining}-${mode.base64}'`;
    const sha = await redis.scriptLoad(body);
    expect(await redis.evalsha(sha, [], [])).toBe(`loaded ${mode.autoPipelining}-${mode.base64}`);
    const script = redis.createScript<string>(`return KEYS[1] .. '=' .. ARGV[1] .. ' ${mode.base64}'`);
    expect(await script.exec([key('s')], ['1'])).toBe(`${key('s')}=1 ${mode.base64}`);
    await redis.scriptFlush();
    expect(await script.exec([key('s')], ['2'])).toBe(`${key('s')}=2 ${mode.base64}`);
  });

  it('8. a wrong token is 401 and an UpstashError; 200 KB bodies work', async () => {
    const wrong = h.client({ ...mode, token: 'not-the-token' });
    const error = await wrong.get(key('x')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(errors.UpstashError);
    expect((error as Error).message).toContain('Unauthorized');
    const big = 'é'.repeat(100_000);
    const redis = client();
    await redis.set(key('big'), big);
    expect(await redis.get(key('big'))).toBe(big);
  });
});

describe('the wire format', () => {
  it('answers {result} with the key present for null, base64-encoding strings on request', async () => {
    expect(await post(h.server, '/', ['get', `${h.prefix}none`])).toMatchObject({
      status: 200,
      json: { result: null },
    });
    await post(h.server, '/', ['set', `${h.prefix}w`, 'héllo']);
    expect(
      (await post(h.server, '/', ['get', `${h.prefix}w`], { 'Upstash-Encoding': 'base64' })).json,
    ).toEqual({
      result: Buffer.from('héllo').toString('base64'),
    });
    expect((await post(h.server, '/', ['get', `${h.prefix}w`])).json).toEqual({ result: 'héllo' });
  });

  it('sends numbers as decimal text and booleans as true/false; a null argument is a 400', async () => {
    await post(h.server, '/', ['set', `${h.prefix}n`, 1.5, 'px', 60_000]);
    expect((await post(h.server, '/', ['get', `${h.prefix}n`])).json).toEqual({ result: '1.5' });
    await post(h.server, '/', ['set', `${h.prefix}b`, true]);
    expect((await post(h.server, '/', ['get', `${h.prefix}b`])).json).toEqual({ result: 'true' });
    const bad = await post(h.server, '/', ['set', `${h.prefix}u`, null]);
    expect(bad.status).toBe(400);
    expect(bad.json).toHaveProperty('error');
  });

  it('answers a Redis error on / with 400 {error} holding the Redis text, never base64', async () => {
    const res = await post(h.server, '/', ['nosuchcommand', 'x'], { 'Upstash-Encoding': 'base64' });
    expect(res.status).toBe(400);
    expect((res.json as { error: string }).error).toContain("ERR unknown command 'nosuchcommand'");
  });

  it('answers EXECABORT with 400 and a pipeline error with 200 per item', async () => {
    const tx = await post(h.server, '/multi-exec', [['set', `${h.prefix}t`, 'v'], ['get']]);
    expect(tx.status).toBe(400);
    expect((tx.json as { error: string }).error).toContain('EXECABORT');
    const pipe = await post(h.server, '/pipeline', [['get'], ['ping']]);
    expect(pipe.status).toBe(200);
    expect(pipe.json).toEqual([
      { error: expect.stringContaining('wrong number of arguments') },
      { result: 'PONG' },
    ]);
  });

  it('answers JSON 404 for an unknown path, 401 without a token, and JSON 400 for a bad body', async () => {
    const missing = await post(h.server, '/no/such/path', ['ping']);
    expect(missing).toMatchObject({ status: 404, contentType: 'application/json' });
    expect(missing.json).toHaveProperty('error');
    const outside = await fetch(`http://127.0.0.1:${h.server.port}/pipeline`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.server.token}` },
      body: '[["ping"]]',
    });
    expect(outside.status).toBe(404);
    expect(await outside.json()).toHaveProperty('error');
    const anonymous = await fetch(`${h.server.url}/`, { method: 'POST', body: '["ping"]' });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ error: 'Unauthorized' });
    const garbled = await post(h.server, '/', '{not json');
    expect(garbled.status).toBe(400);
    expect(garbled.json).toHaveProperty('error');
  });

  it('refuses commands that would change a shared connection', async () => {
    const res = await post(h.server, '/', ['select', 2]);
    expect(res.status).toBe(400);
    expect((res.json as { error: string }).error).toContain('not supported');
  });
});
