/** What a herd of concurrent requests got. */
export interface HerdResult {
  statuses: number[];
  bodies: string[];
  /** From the first request sent to the last answer. */
  ms: number;
}

/** The status recorded for a request with no complete answer within `herd`'s limit. */
export const NO_ANSWER = 0;

/**
 * Sends `count` requests at once through `send` and reads every answer. A request still unanswered
 * after `limit` ms is recorded as {@link NO_ANSWER} (a request stuck on another request's promise
 * can hang rather than fail), so a regression fails the assertions instead of the test's timeout.
 */
export async function herd(
  count: number,
  send: (index: number) => Promise<Response>,
  limit = 5000,
): Promise<HerdResult> {
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: count }, async (_, index) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<{ status: number; body: string }>((resolve) => {
        timer = setTimeout(() => resolve({ status: NO_ANSWER, body: '' }), limit);
      });
      const answer = (async () => {
        const response = await send(index);
        return { status: response.status, body: await response.text() };
      })();
      try {
        return await Promise.race([answer, late]);
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return {
    statuses: answers.map((answer) => answer.status),
    bodies: answers.map((answer) => answer.body),
    ms: Math.round(performance.now() - started),
  };
}

/** The status `herdWithAbort` records for the request whose client gave up. */
export const ABORTED = 499;

/**
 * A herd in which one client gives up: request 0 goes first (it starts the fill), the others 20 ms
 * later (they join it); request `abortIndex` is aborted `abortAfter` ms after it was sent, and is
 * recorded as {@link ABORTED} with an empty body.
 *
 * Seen with miniflare 4.20260426: workerd runs the handler to completion after its client has gone
 * (through `dispatchFetch` and through a direct socket alike; `request.signal` does not fire), so
 * what this checks is that a disconnect costs the other requests nothing.
 */
export function herdWithAbort(
  count: number,
  send: (init: { signal?: AbortSignal }) => Promise<Response>,
  abortIndex: number,
  abortAfter: number,
): Promise<HerdResult> {
  return herd(count, async (index) => {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    if (index !== abortIndex) return send({});
    const controller = new AbortController();
    setTimeout(() => controller.abort(), abortAfter);
    return send({ signal: controller.signal }).catch(() => new Response('', { status: ABORTED }));
  });
}
