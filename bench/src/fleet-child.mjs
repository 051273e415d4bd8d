// One replica of the fleet scenario: a real child process that creates every variant, then on
// each 'prepare' + 'go' fires its callers at one key at once and reports fills and latencies.
import { fleetVariant } from './peers/index.mjs';
import { sleep, startCallers } from './stats.mjs';

const instances = new Map();
let prepared;

function send(message) {
  process.send?.(message);
}

async function setup({ url, upstash, prefix, variants, ttlMs }) {
  const unavailable = {};
  for (const id of variants) {
    try {
      instances.set(id, await fleetVariant(id).create({ url, upstash, prefix, ttlMs }));
    } catch (error) {
      unavailable[id] = error instanceof Error ? error.message : String(error);
    }
  }
  send({ type: 'setup-done', unavailable });
}

async function go() {
  const { variant, key, callers, fillMs } = prepared;
  const instance = instances.get(variant);
  let fills = 0;
  const fillTook = [];
  const fill = async () => {
    fills++;
    const t = performance.now();
    await sleep(fillMs);
    fillTook.push(performance.now() - t);
    return { count: 1, by: process.pid };
  };
  const { all, latencies, counts } = startCallers(callers, () => instance.get(key, fill));
  await all;
  send({ type: 'result', fills, fillTook, latencies, errors: counts.failed });
}

async function close() {
  for (const instance of instances.values()) {
    try {
      await instance.close();
    } catch {
      // Closing is best effort; the process exits next.
    }
  }
  process.exit(0);
}

process.on('message', (message) => {
  if (message.type === 'setup') setup(message);
  else if (message.type === 'prepare') {
    prepared = message;
    globalThis.gc?.();
    send({ type: 'prepared' });
  } else if (message.type === 'go') go();
  else if (message.type === 'close') close();
});
process.on('disconnect', () => process.exit(0));
