import { connect, createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the port of a listening socket'));
      });
    });
  });
}

/**
 * Sends PING over a raw socket; true on +PONG within `timeoutMs` (or, with `authIsAlive`, on the
 * NOAUTH error a server with `requirepass` answers).
 */
export function ping(host: string, port: number, timeoutMs = 500, authIsAlive = false): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      const reply = data.toString();
      done(reply.startsWith('+PONG') || (authIsAlive && reply.startsWith('-NOAUTH')));
    });
    socket.on('error', () => done(false));
  });
}
