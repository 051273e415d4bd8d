import { errors } from '@upstash/redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './harness.js';

let h: Harness;
/** How long the 'hang' fault is watched for an answer that must not come (ms). */
const HANG_WINDOW_MS = 300;
beforeAll(async () => {
  h = await startHarness('rest-fault');
});
afterEach(() => {
  h.server.setFault(null);
});
afterAll(async () => {
  await h?.stop();
});

describe('fault injection', () => {
  it("'500' answers 500 with a JSON error: the client throws an UpstashError", async () => {
    h.server.setFault('500');
    const error = await h
      .client()
      .get(`${h.prefix}k`)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(errors.UpstashError);
    expect((error as Error).message).toContain('injected fault');
  });

  it("'garbage' answers a body that is not JSON: the client throws a parse error", async () => {
    h.server.setFault('garbage');
    const error = await h
      .client()
      .get(`${h.prefix}k`)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(errors.UpstashJSONParseError);
  });

  it("'reset' drops the connection: the client sees a network error", async () => {
    h.server.setFault('reset');
    const error = await h
      .client()
      .get(`${h.prefix}k`)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('fetch failed');
  });

  it("'hang' never answers until the fault is cleared", async () => {
    h.server.setFault('hang');
    let settled = false;
    const pending = h
      .client()
      .get(`${h.prefix}k`)
      .then(
        () => 'answered',
        () => 'failed',
      )
      .finally(() => {
        settled = true;
      });
    // The scenario: a window in which a hanging server must not answer.
    await new Promise((resolve) => setTimeout(resolve, HANG_WINDOW_MS));
    expect(settled).toBe(false);
    h.server.setFault(null);
    expect(await pending).toBe('failed');
  });

  it('serves normally again once the fault is cleared, and counts what it served', async () => {
    const before = h.server.stats();
    h.server.setFault('500');
    await h
      .client()
      .ping()
      .catch(() => undefined);
    h.server.setFault(null);
    expect(await h.client().ping()).toBe('PONG');
    const after = h.server.stats();
    expect(after.requests - before.requests).toBe(2);
    expect(after.commands - before.commands).toBe(1);
  });

  it('rejects an unknown fault name', () => {
    expect(() => h.server.setFault('boom' as never)).toThrow(TypeError);
  });
});
