import type { Redis } from 'ioredis';

/**
 * Dedicated connections for MULTI..EXEC, so a transaction never shares its connection with other
 * requests. Idle connections are kept (up to `maxIdle`) and closed with the pool.
 */
export class ConnectionPool {
  private readonly idle: Redis[] = [];
  private readonly all = new Set<Redis>();
  private closed = false;

  constructor(
    private readonly base: Redis,
    private readonly maxIdle = 4,
  ) {}

  /** An idle connection, or a new one. */
  acquire(): Redis {
    const reused = this.idle.pop();
    if (reused !== undefined) return reused;
    const connection = this.base.duplicate();
    this.all.add(connection);
    return connection;
  }

  /** Gives `connection` back; `healthy: false` (or a full pool) closes it instead. */
  release(connection: Redis, healthy: boolean): void {
    if (healthy && !this.closed && this.idle.length < this.maxIdle && connection.status === 'ready') {
      this.idle.push(connection);
      return;
    }
    this.all.delete(connection);
    connection.disconnect();
  }

  /** Connections currently open (idle or in use). */
  get size(): number {
    return this.all.size;
  }

  /** Closes every connection. */
  close(): void {
    this.closed = true;
    this.idle.length = 0;
    for (const connection of this.all) connection.disconnect();
    this.all.clear();
  }
}
