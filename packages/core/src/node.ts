// The entry point for runtimes that resolve the `node` export condition (Node, Bun, Deno). It adds
// what only they offer to the runtime-neutral entry: an AsyncLocalStorage, so that a fill that calls
// `getOrCompute` on its own key fails at once instead of waiting for itself forever, and a thread
// that keeps the coarse clock of busy hit paths.
import { AsyncLocalStorage } from 'node:async_hooks';
import { Worker } from 'node:worker_threads';
import {
  BEAT,
  CONTROL_OFFSET,
  clockThreadEnded,
  DISENGAGE_BEATS,
  EXIT_AFTER_MS,
  EXITED,
  IDLE,
  RUNNING,
  SLEEP,
  STATE,
  TICK_MS,
  useClockThread,
} from './clock.js';
import { useAsyncContext } from './fill-context.js';
import type { FillFrame } from './shared.js';

useAsyncContext(() => new AsyncLocalStorage<FillFrame>());

/**
 * The clock thread's program (a CommonJS script for `new Worker(source, { eval: true })`): writes
 * the time every TICK_MS while heartbeats come, sleeps when they stop, ends after
 * EXIT_AFTER_MS asleep.
 */
const clockThreadSource = `'use strict';
const { workerData } = require('node:worker_threads');
const seconds = new Uint32Array(workerData, 0, 1);
const control = new Int32Array(workerData, ${CONTROL_OFFSET}, 3);
let beats = Atomics.load(control, ${BEAT});
let windowStart = Date.now();
for (;;) {
  const now = Date.now();
  if (Atomics.load(control, ${STATE}) === ${RUNNING}) seconds[0] = Math.floor(now / 1000);
  if (now - windowStart >= 1000) {
    const latest = Atomics.load(control, ${BEAT});
    if (((latest - beats) | 0) < ${DISENGAGE_BEATS} && Atomics.compareExchange(control, ${STATE}, ${RUNNING}, ${IDLE}) === ${RUNNING}) {
      seconds[0] = 0;
    }
    beats = latest;
    windowStart = now;
  }
  const state = Atomics.load(control, ${STATE});
  if (state === ${EXITED}) break;
  if (state === ${IDLE}) {
    seconds[0] = 0;
    if (Atomics.wait(control, ${STATE}, ${IDLE}, ${EXIT_AFTER_MS}) === 'timed-out' &&
        Atomics.compareExchange(control, ${STATE}, ${IDLE}, ${EXITED}) === ${IDLE}) break;
    beats = Atomics.load(control, ${BEAT});
    windowStart = Date.now();
    continue;
  }
  Atomics.wait(control, ${SLEEP}, 0, ${TICK_MS});
}
`;

// The coarse clock's thread (clock.ts): started only while hits come fast enough to pay for it. It
// never keeps the process alive, takes none of the parent's flags (a loader, --inspect) and shares
// nothing but a 16-byte buffer.
// Only the newest thread's end counts: one that ended late must not mark its successor as gone.
let clockThread: Worker | undefined;
useClockThread((buffer) => {
  const worker = new Worker(clockThreadSource, {
    eval: true,
    workerData: buffer,
    execArgv: [],
    name: 'stampede-clock',
  });
  clockThread = worker;
  worker.unref();
  worker.on('error', () => {
    if (clockThread === worker) clockThreadEnded(true);
  });
  worker.on('exit', () => {
    if (clockThread === worker) clockThreadEnded();
  });
});

export * from './index.js';
