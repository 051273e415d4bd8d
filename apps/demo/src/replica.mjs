// One server process: database, cache, metrics and routes, until a signal stops it.
import { createAdaptorServer } from '@hono/node-server';
import { createApp } from './app.mjs';
import { createBookmarkCounter } from './bookmarks.mjs';
import { openCache } from './cache.mjs';
import { ensureSeeded, openDatabase } from './db.mjs';
import { createFleet } from './fleet.mjs';
import { localSlot, supervisedSlot } from './load-slot.mjs';
import { createLog } from './log.mjs';
import { createPrometheus, snapshot } from './metrics.mjs';

const SHUTDOWN_GRACE_MS = 5_000;

/**
 * @param {import('node:http').Server} server
 * @param {string} host
 * @param {number} port
 * @returns {Promise<string>} the base URL it listens on
 */
function listen(server, host, port) {
  return new Promise((resolve, reject) => {
    server.once('error', (error) => {
      const code = /** @type {NodeJS.ErrnoException} */ (error).code;
      if (code === 'EADDRINUSE')
        reject(new Error(`port ${port} on ${host} is in use: set PORT to a free one`));
      else reject(error);
    });
    // A herd opens up to 2,000 sockets at once: a deep backlog keeps the kernel from dropping any.
    server.listen({ port, host, backlog: 4096 }, () => {
      const address = /** @type {import('node:net').AddressInfo} */ (server.address());
      const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve(`http://${shown}:${address.port}`);
    });
  });
}

/**
 * Starts one replica (or the single process) and runs it until SIGINT/SIGTERM, or until the
 * supervisor goes away.
 * @param {import('./config.mjs').Config} config
 */
export async function runReplica(config) {
  const log = createLog(config.replicaId);
  const supervised = typeof process.send === 'function';
  const file = ensureSeeded(config.dataDir, config.seedRows, log.info);
  const db = openDatabase(file, { latencyMs: config.dbLatencyMs, pool: config.dbPool });
  /** @type {Awaited<ReturnType<typeof openCache>>} */
  let cache;
  try {
    cache = await openCache(config);
  } catch (error) {
    db.close();
    throw error;
  }
  const counter = createBookmarkCounter(cache.cache, db, { ttl: config.cacheTtl, swr: config.cacheSwr });
  const tiered = cache.tiered;
  const local = () => snapshot(config.replicaId, db, counter, tiered);

  const prometheus = createPrometheus(config.replicaId, db);
  let selfUrl = '';
  let peers = config.peers;
  const fleet = createFleet({ selfUrl: () => selfUrl, peers: () => peers, local });
  const app = createApp({
    config,
    counter,
    db,
    fleet,
    local,
    prometheus,
    cacheDescription: cache.description,
    loadSlot: supervised ? supervisedSlot(process, config.replicaId) : localSlot(),
  });
  const server = /** @type {import('node:http').Server} */ (createAdaptorServer({ fetch: app.fetch }));

  let stopping = false;
  const stop = async (/** @type {string} */ why) => {
    if (stopping) return;
    stopping = true;
    log.info(`${why}: shutting down`);
    setTimeout(() => {
      log.error(`still stopping after ${SHUTDOWN_GRACE_MS} ms; exiting`);
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    await new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    });
    prometheus.close();
    await cache.close();
    db.close();
    log.info('stopped');
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));

  try {
    selfUrl = await listen(server, config.host, config.port);
  } catch (error) {
    prometheus.close();
    await cache.close();
    db.close();
    throw error;
  }
  const { rows } = db.stats();
  log.info(`${rows.toLocaleString('en-US')} bookmarks in ${file}`);
  log.info(`cache: ${cache.description}; TTL ${config.cacheTtl}, SWR ${config.cacheSwr ?? 'off'}`);
  if (supervised) {
    process.on('message', (/** @type {{ type?: string, peers?: string[] }} */ message) => {
      if (message?.type === 'peers' && Array.isArray(message.peers)) peers = message.peers;
    });
    process.on('disconnect', () => void stop('supervisor gone'));
    process.send?.({ type: 'ready', url: selfUrl });
    log.info(`listening on ${selfUrl}`);
  } else {
    log.info(`ready: open ${selfUrl}/ in your browser (Ctrl-C to stop)`);
  }
}
