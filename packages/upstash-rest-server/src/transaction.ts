import type { RestCommand } from './command.js';
import type { ConnectionPool } from './connection-pool.js';
import { errorText, isRedisReplyError } from './redis-reply.js';
import { type JsonResult, type ResultEncoding, respToJson } from './resp-to-json.js';

/** One item of a `/pipeline` or `/multi-exec` answer. */
export type BatchItem = { result: JsonResult } | { error: string };

/** How a transaction ended: per-item results, or a discarded transaction (EXECABORT) as a whole. */
export type TransactionOutcome =
  | { readonly ok: true; readonly items: BatchItem[] }
  | { readonly ok: false; readonly status: number; readonly error: string };

/** Runs `commands` as MULTI..EXEC on a dedicated connection from `pool`. */
export async function runTransaction(
  pool: ConnectionPool,
  commands: readonly RestCommand[],
  encoding: ResultEncoding,
): Promise<TransactionOutcome> {
  const connection = pool.acquire();
  let healthy = true;
  try {
    const multi = connection.multi();
    for (const [name, ...args] of commands) multi.callBuffer(name, ...args);
    const replies = await multi.exec();
    if (replies === null) return { ok: false, status: 400, error: 'EXECABORT transaction aborted' };
    const items = replies.map(([error, reply]): BatchItem => {
      if (error !== null) return { error: errorText(error) };
      if (reply instanceof Error) return { error: reply.message };
      return { result: respToJson(reply, encoding) };
    });
    return { ok: true, items };
  } catch (error) {
    if (isRedisReplyError(error)) return { ok: false, status: 400, error: error.message };
    healthy = false;
    return { ok: false, status: 500, error: errorText(error) };
  } finally {
    pool.release(connection, healthy);
  }
}
