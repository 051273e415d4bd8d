// A child process the parent talks to by IPC messages: `next(type)` resolves the child's next
// message of that type.
import { fork } from 'node:child_process';
import { pinToHitCpu } from './machine.mjs';

/** `pin`: run the child on the hit CPU only (see `machine.mjs`), for hit measurements. */
export function startChild(path, { execArgv = [], env = process.env, pin = false } = {}) {
  const child = fork(path, [], {
    execArgv: ['--expose-gc', ...execArgv],
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const cpu = pin ? pinToHitCpu(child.pid) : undefined;
  const waiters = [];
  child.on('message', (message) => {
    const index = waiters.findIndex((w) => w.type === message.type);
    if (index !== -1) waiters.splice(index, 1)[0].resolve(message);
  });
  const next = (type, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`child ${path}: no '${type}' within ${timeoutMs} ms`)),
        timeoutMs,
      );
      waiters.push({
        type,
        resolve: (message) => {
          clearTimeout(timer);
          resolve(message);
        },
      });
    });
  /** Sends `message` and resolves the reply of type `reply`. */
  const ask = (message, reply, timeoutMs) => {
    const answer = next(reply, timeoutMs);
    child.send(message);
    return answer;
  };
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', resolve);
      child.send({ type: 'close' });
      setTimeout(() => child.kill(), 5_000).unref();
    });
  return { child, next, ask, stop, cpu };
}
