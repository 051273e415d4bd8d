// One process of the steady-load scenario: on 'go' it reads one key at a steady rate for a while
// and reports every read (start on a clock shared by the processes, latency, the value's fill time),
// every fill it ran (start and end) and, for stampede's early refreshes, how long before the
// value's expiry the draw that started each fill came.
import { onStampedeEvent } from '@stampede/core';
import { steadyVariants } from './peers/steady.mjs';
import { sleep } from './stats.mjs';

const instances = new Map();
const now = () => performance.timeOrigin + performance.now();
const send = (message) => process.send?.(message);

// The latest `early-refresh` event per cache (stampede names each cache after its variant): a
// refresh fill in this process follows its own draw, so the draw a fill started from is the
// latest one before it (a draw whose refresh lost the lock starts no fill here).
const lastDraw = new Map();
onStampedeEvent((event) => {
  if (event.type === 'early-refresh')
    lastDraw.set(event.cache, { at: now(), remainingMs: event.remainingMs });
});

async function go({ variant, key, durationMs, intervalMs, fillMs }) {
  const instance = instances.get(variant);
  const fills = [];
  lastDraw.delete(variant);
  const fill = async () => {
    const started = now();
    // A draw is followed by one lock attempt (a round trip) and then the fill; an older draw lost
    // the lock, and this fill is a miss's.
    const draw = lastDraw.get(variant);
    lastDraw.delete(variant);
    const fromDraw = draw !== undefined && started - draw.at < fillMs / 2;
    await sleep(fillMs);
    const ended = now();
    // [start, end, ms from the draw to the expiry of the value it replaces (or -1: not a draw's)]
    fills.push([started, ended, fromDraw ? draw.remainingMs : -1]);
    return { filledAt: ended, fillStarted: started };
  };
  const reads = [];
  const pending = [];
  const end = now() + durationMs;
  while (now() < end) {
    const start = now();
    pending.push(
      instance.get(key, fill).then(
        (value) => reads.push([start, now() - start, value?.filledAt ?? 0, value?.fillStarted ?? 0]),
        () => reads.push([start, now() - start, -1, 0]),
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
      if (!message.variants.includes(variant.id)) continue;
      try {
        instances.set(
          variant.id,
          await variant.create({ ...message, prefix: `${message.prefix}${variant.id}:`, name: variant.id }),
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
