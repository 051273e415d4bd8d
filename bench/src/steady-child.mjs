// One process of the steady-load scenario: on 'go' it reads one key at a steady rate for a while
// and reports every read (start on a clock shared by the processes, latency, the value's fill time)
// and every fill it ran.
import { steadyVariants } from './peers/steady.mjs';
import { sleep } from './stats.mjs';

const instances = new Map();
const now = () => performance.timeOrigin + performance.now();
const send = (message) => process.send?.(message);

async function go({ variant, key, durationMs, intervalMs, fillMs }) {
  const instance = instances.get(variant);
  const fills = [];
  const fill = async () => {
    const started = now();
    await sleep(fillMs);
    fills.push(started);
    return { filledAt: now() };
  };
  const reads = [];
  const pending = [];
  const end = now() + durationMs;
  while (now() < end) {
    const start = now();
    pending.push(
      instance.get(key, fill).then(
        (value) => reads.push([start, now() - start, value?.filledAt ?? 0]),
        () => reads.push([start, now() - start, -1]),
      ),
    );
    await sleep(intervalMs);
  }
  await Promise.all(pending);
  await sleep(fillMs * 2); // a refresh started near the end still counts
  send({ type: 'result', reads, fills });
}

process.on('message', async (message) => {
  if (message.type === 'setup') {
    const unavailable = {};
    for (const variant of steadyVariants) {
      try {
        instances.set(
          variant.id,
          await variant.create({ ...message, prefix: `${message.prefix}${variant.id}:` }),
        );
      } catch (error) {
        unavailable[variant.id] = error instanceof Error ? error.message : String(error);
      }
    }
    send({ type: 'setup-done', unavailable });
  } else if (message.type === 'go') {
    go(message);
  } else if (message.type === 'close') {
    for (const instance of instances.values()) await instance.close().catch(() => {});
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
