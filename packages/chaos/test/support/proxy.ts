import { connect, createServer, type Server, type Socket } from 'node:net';

/** What the proxy does to traffic right now. */
export type ProxyMode =
  /** Forward everything at once. */
  | { readonly kind: 'pass' }
  /** Forward every chunk `ms` later, in both directions (order kept). */
  | { readonly kind: 'latency'; readonly ms: number }
  /** Accept connections and take their bytes, forward nothing until healed (a partition TCP rides out). */
  | { readonly kind: 'blackhole' }
  /** Destroy every connection at once and every new one as soon as it is accepted (reset, refused). */
  | { readonly kind: 'refuse' };

/** A fault-injecting TCP proxy on 127.0.0.1 in front of one upstream port. */
export interface ChaosProxy {
  readonly port: number;
  /** `redis://` URL of the proxy, with `auth` (`':password'`) if given. */
  url(auth?: string): string;
  /** Switches the mode; `pass` heals (held bytes are delivered in order, as TCP would after a partition). */
  set(mode: ProxyMode): void;
  /** Destroys every open connection once (a reset); new connections are accepted as the mode says. */
  dropAll(): void;
  /** Bytes forwarded from clients to the upstream since the start (to prove nothing was sent). */
  readonly bytesUp: number;
  /**
   * Bytes received from clients since the start, counted on arrival (before any latency or
   * black-holing): tells a test that a request is on its way without waiting for it to land.
   */
  readonly bytesReceived: number;
  /** Connections accepted since the start. */
  readonly accepted: number;
  /** Connections open now. */
  readonly open: number;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

interface Lane {
  /** Chunks not yet written, with the time each is due. */
  readonly queue: { readonly at: number; readonly chunk: Buffer }[];
  timer: ReturnType<typeof setTimeout> | undefined;
}

interface Pipe {
  readonly client: Socket;
  upstream: Socket | undefined;
  /** Client to upstream, upstream to client: FIFO, so a change of mode never reorders bytes. */
  readonly up: Lane;
  readonly down: Lane;
}

/**
 * Starts a {@link ChaosProxy} to `upstreamHost:upstreamPort`. Written on `node:net` only: a connection
 * is piped chunk by chunk through `forward`, which applies the current mode.
 */
export async function startProxy(upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<ChaosProxy> {
  let mode: ProxyMode = { kind: 'pass' };
  let bytesUp = 0;
  let bytesReceived = 0;
  let accepted = 0;
  const pipes = new Set<Pipe>();

  const destroy = (pipe: Pipe): void => {
    pipes.delete(pipe);
    clearTimeout(pipe.up.timer);
    clearTimeout(pipe.down.timer);
    pipe.client.destroy();
    pipe.upstream?.destroy();
  };

  const write = (pipe: Pipe, toUpstream: boolean, chunk: Buffer): void => {
    if (toUpstream) {
      bytesUp += chunk.length;
      pipe.upstream?.write(chunk);
    } else if (!pipe.client.destroyed) {
      pipe.client.write(chunk);
    }
  };

  // Writes the due chunks of a lane in order; black-holed (or not yet connected) lanes just hold.
  const drain = (pipe: Pipe, toUpstream: boolean): void => {
    const lane = toUpstream ? pipe.up : pipe.down;
    if (lane.timer !== undefined) return;
    if (!pipes.has(pipe) || mode.kind === 'blackhole') return;
    if (pipe.upstream === undefined || pipe.upstream.connecting) return;
    const now = Date.now();
    for (;;) {
      const head = lane.queue[0];
      if (head === undefined) return;
      if (head.at > now) {
        lane.timer = setTimeout(() => {
          lane.timer = undefined;
          drain(pipe, toUpstream);
        }, head.at - now);
        return;
      }
      lane.queue.shift();
      write(pipe, toUpstream, head.chunk);
    }
  };

  const forward = (pipe: Pipe, toUpstream: boolean, chunk: Buffer): void => {
    if (!pipes.has(pipe)) return;
    if (toUpstream) bytesReceived += chunk.length;
    const delay = mode.kind === 'latency' ? mode.ms : 0;
    (toUpstream ? pipe.up : pipe.down).queue.push({ at: Date.now() + delay, chunk });
    drain(pipe, toUpstream);
  };

  const openUpstream = (pipe: Pipe): void => {
    const upstream = connect({ host: upstreamHost, port: upstreamPort });
    pipe.upstream = upstream;
    upstream.on('data', (chunk: Buffer) => forward(pipe, false, chunk));
    upstream.on('error', () => destroy(pipe));
    upstream.on('close', () => destroy(pipe));
    upstream.on('connect', () => flush(pipe));
  };

  const flush = (pipe: Pipe): void => {
    drain(pipe, true);
    drain(pipe, false);
  };

  const server: Server = createServer((client) => {
    accepted++;
    client.setNoDelay(true);
    const pipe: Pipe = {
      client,
      upstream: undefined,
      up: { queue: [], timer: undefined },
      down: { queue: [], timer: undefined },
    };
    pipes.add(pipe);
    client.on('error', () => destroy(pipe));
    client.on('close', () => destroy(pipe));
    if (mode.kind === 'refuse') {
      destroy(pipe);
      return;
    }
    client.on('data', (chunk: Buffer) => forward(pipe, true, chunk));
    // A black-holed connection is accepted but not even opened upstream until the proxy heals.
    if (mode.kind !== 'blackhole') openUpstream(pipe);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('the proxy has no port');
  const port = address.port;

  return {
    port,
    url: (auth) => `redis://${auth === undefined ? '' : `${auth}@`}127.0.0.1:${port}`,
    set(next) {
      mode = next;
      if (next.kind === 'refuse') {
        for (const pipe of [...pipes]) destroy(pipe);
        return;
      }
      if (next.kind === 'blackhole') return;
      for (const pipe of pipes) {
        if (pipe.upstream === undefined) openUpstream(pipe);
        else flush(pipe);
      }
    },
    dropAll() {
      for (const pipe of [...pipes]) destroy(pipe);
    },
    get bytesUp() {
      return bytesUp;
    },
    get bytesReceived() {
      return bytesReceived;
    },
    get accepted() {
      return accepted;
    },
    get open() {
      return pipes.size;
    },
    async close() {
      for (const pipe of [...pipes]) destroy(pipe);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
