// Replica mode: the supervisor seeds the database, checks Redis, forks REPLICAS server processes
// (ports PORT, PORT+1, ...), tells each where the others are, keeps the fleet's one load slot (a
// herd or a steady load at a time), and stops them all on a signal.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connectRedis } from './cache.mjs';
import { ensureSeeded } from './db.mjs';
import { createSlotKeeper } from './load-slot.mjs';
import { createLog } from './log.mjs';

const ENTRY = fileURLToPath(new URL('./server.mjs', import.meta.url));
const STOP_GRACE_MS = 6_000;

/**
 * @param {import('./config.mjs').Config} config
 * @returns {Promise<void>} resolves when every replica has stopped; the exit code is set on failure
 */
export async function runSupervisor(config) {
  const log = createLog(0);
  ensureSeeded(config.dataDir, config.seedRows, log.info);
  if (config.cache === 'redis') {
    const client = await connectRedis(config.redisUrl); // fails fast, before any fork
    await client.quit();
  } else {
    log.info('REPLICAS without CACHE=redis: each replica has its own memory cache (up to one fill each)');
  }
  log.info(`starting ${config.replicas} replicas`);

  /** @type {import('node:child_process').ChildProcess[]} */
  const children = [];
  /** @type {string[]} */
  const urls = [];
  let stopping = false;
  let failed = false;

  const stopAll = (/** @type {string} */ why) => {
    if (stopping) return;
    stopping = true;
    log.info(`${why}: stopping ${children.length} replicas`);
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    setTimeout(() => {
      for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    }, STOP_GRACE_MS).unref();
  };
  process.once('SIGINT', () => stopAll('SIGINT'));
  process.once('SIGTERM', () => stopAll('SIGTERM'));

  const exits = [];
  const ready = [];
  // One herd or steady load at a time in the whole fleet: the replicas ask here.
  const loadSlot = createSlotKeeper();
  for (let id = 1; id <= config.replicas; id++) {
    const child = fork(ENTRY, [], {
      env: {
        ...process.env,
        STAMPEDE_DEMO_REPLICA_ID: String(id),
        PORT: String(config.port === 0 ? 0 : config.port + id - 1),
        DATA_DIR: config.dataDir,
      },
      stdio: 'inherit',
    });
    children.push(child);
    loadSlot.serve(child);
    ready.push(
      new Promise((resolve) => {
        child.on('message', (/** @type {{ type?: string, url?: string }} */ message) => {
          if (message?.type === 'ready' && typeof message.url === 'string') {
            urls[id - 1] = message.url;
            resolve(undefined);
          }
        });
      }),
    );
    exits.push(
      new Promise((resolve) => {
        child.on('exit', (code, signal) => {
          if (!stopping) {
            failed = true;
            log.error(`replica ${id} exited (${signal ?? `code ${code}`}) before being asked to`);
            stopAll('a replica failed');
          }
          resolve(undefined);
        });
      }),
    );
  }

  const allReady = Promise.all(ready).then(() => true);
  const firstExit = Promise.race(exits).then(() => false);
  if (await Promise.race([allReady, firstExit])) {
    for (const child of children) child.send({ type: 'peers', peers: urls });
    log.info(`fleet of ${config.replicas} replicas ready: open ${urls[0]}/ in your browser (Ctrl-C to stop)`);
    log.info(`replicas: ${urls.join(' ')}`);
  }
  await Promise.all(exits);
  log.info('all replicas stopped');
  if (failed) process.exitCode = 1;
}
