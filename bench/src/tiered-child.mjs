// One replica of the tiered scenario's propagation rounds: a child process holding one tiered
// cache (stampede or bentocache) whose fill reads the "database" (a plain Redis key). 'warm' reads
// the key until it holds the expected value; 'watch' reads it every millisecond until the new value
// appears and reports 'seen'; 'invalidate' invalidates the key and reports 'invalidated'.
import { tieredBusVariants } from './peers/tiered.mjs';
import { connect } from './redis.mjs';

let instance;
let db;
let dbKey;
let fills = 0;

const send = (message) => process.send?.(message);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fill = async () => {
  fills++;
  return { version: Number(await db.get(dbKey)) };
};

async function readUntil(key, version, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await instance.get(key, fill);
    if (value.version === version) return true;
    if (performance.now() > deadline) return false;
    await sleep(1);
  }
}

process.on('message', async (message) => {
  try {
    if (message.type === 'setup') {
      const variant = tieredBusVariants.find((v) => v.id === message.variant);
      instance = await variant.create({ url: message.url, prefix: message.prefix });
      db = connect(message.url);
      dbKey = message.dbKey;
      send({ type: 'setup-done' });
    } else if (message.type === 'warm') {
      const ok = await readUntil(message.key, message.version, 5_000);
      send({ type: 'warmed', ok, fills });
    } else if (message.type === 'watch') {
      send({ type: 'watching' });
      const ok = await readUntil(message.key, message.version, 5_000);
      send({ type: 'seen', ok });
    } else if (message.type === 'invalidate') {
      await instance.invalidate(message.key);
      send({ type: 'invalidated' });
    } else if (message.type === 'close') {
      await instance?.close();
      await db?.quit();
      process.exit(0);
    }
  } catch (error) {
    send({ type: 'error', message: error instanceof Error ? error.message : String(error) });
  }
});
process.on('disconnect', () => process.exit(0));
