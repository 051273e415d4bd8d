// Scenario 1's worker: one hit case in its own process, so no other library's code shares its JIT
// state or heap. 'setup' builds and calibrates the case; each 'sample' times one run.
import { peers } from './peers/index.mjs';
import { rawLru } from './peers/raw-lru.mjs';

let run;
let n;

/** Warms `run` up (at least `warmMs` of running, so the JIT has settled), then sizes a sample. */
async function calibrate(sampleMs, warmMs = 300) {
  let size = 1_000;
  let spent = 0;
  for (;;) {
    const t0 = performance.now();
    await run(size);
    const took = performance.now() - t0;
    spent += took;
    if (took >= 25 && spent >= warmMs) return Math.max(1_000, Math.round((size * sampleMs) / took));
    if (took < 25) size *= 2;
  }
}

async function findCase(id) {
  if (id === 'raw') return rawLru;
  const [peerId, index] = id.split('#');
  // Loaded only in the tiered cases' processes: the memory cases keep their plain module graph.
  if (peerId === 'tiered') return (await import('./peers/tiered.mjs')).tieredHitCases[Number(index)];
  return peers.find((peer) => peer.id === peerId).hit[Number(index)];
}

process.on('message', async (message) => {
  if (message.type === 'setup') {
    const keys = Array.from({ length: message.keys }, (_, i) => `bookmark:${i}`);
    run = await (await findCase(message.id)).make(keys, message.context);
    n = await calibrate(message.sampleMs);
    process.send({ type: 'ready', n });
  } else if (message.type === 'sample') {
    globalThis.gc?.();
    const t0 = process.hrtime.bigint();
    const sink = await run(n);
    process.send({ type: 'sample', nsPerOp: Number(process.hrtime.bigint() - t0) / n, misses: n - sink });
  } else if (message.type === 'close') {
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
