import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A stand-in database on 127.0.0.1 that the examples' fills reach with a real `fetch`. */
export interface DbServer {
  readonly url: string;
  /** Queries answered or in progress since start (or the last `reset`): one per fill. */
  readonly queries: number;
  reset(): void;
  close(): Promise<void>;
}

/**
 * Starts the database: every request counts as one query, waits `latency` ms (a fill slow enough
 * for a herd to pile up behind it), then answers JSON that names the query's number, so callers
 * served by different fills get different values.
 */
export async function startDbServer(latency = 150): Promise<DbServer> {
  let queries = 0;
  const server = createServer((request, response) => {
    const n = ++queries;
    setTimeout(() => {
      response.setHeader('content-type', 'application/json');
      response.end(
        JSON.stringify(
          request.url === '/bookmark-count' ? { count: 1000 + n } : [{ id: n, title: `query ${n}` }],
        ),
      );
    }, latency);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get queries() {
      return queries;
    },
    reset() {
      queries = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
