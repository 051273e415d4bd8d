import { callSafely } from './call-safely.js';

/** A client that says when it has ended for good: an ioredis `Redis` or `Cluster`, a node-redis client. */
export interface EndingClient {
  on(event: 'end', listener: () => void): unknown;
  off(event: 'end', listener: () => void): unknown;
}

interface EndListeners {
  readonly listeners: Set<() => void>;
  readonly dispatch: () => void;
}

const byClient = new WeakMap<EndingClient, EndListeners>();

/**
 * Calls `listener` when `client` emits `'end'`; returns the function that stops it (idempotent).
 * Every cache on one client shares one listener of the client's: a listener per cache would pass
 * Node's default of 10 listeners per event with an eleventh cache (prefixes per tenant, say) and
 * print a "possible EventEmitter memory leak" warning about the user's own client. A throwing
 * listener does not keep the others from running.
 */
export function onClientEnd(client: EndingClient, listener: () => void): () => void {
  let record = byClient.get(client);
  if (record === undefined) {
    const listeners = new Set<() => void>();
    const created: EndListeners = {
      listeners,
      dispatch: () => {
        for (const each of [...listeners]) callSafely(each);
      },
    };
    record = created;
    byClient.set(client, created);
    client.on('end', created.dispatch);
  }
  const { listeners, dispatch } = record;
  // One entry per registration, even when the same function is registered twice.
  const registration = (): void => listener();
  listeners.add(registration);
  return () => {
    if (!listeners.delete(registration) || listeners.size !== 0) return;
    if (byClient.get(client)?.dispatch !== dispatch) return;
    byClient.delete(client);
    client.off('end', dispatch);
  };
}
