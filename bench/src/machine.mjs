// What the run ran on, for the report header.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { Redis } from 'ioredis';

function cpuModel() {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    return line ? line.split(':')[1].trim() : 'unknown CPU';
  } catch {
    return 'unknown CPU';
  }
}

async function redisVersion(url) {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    const text = await client.info('server');
    return /redis_version:(\S+)/.exec(text)?.[1] ?? 'unknown';
  } catch {
    return 'not reachable';
  } finally {
    client.disconnect();
  }
}

export async function machine(redisUrl) {
  return {
    cpu: cpuModel(),
    nproc: availableParallelism(),
    memory: `${Math.round(totalmem() / 1_073_741_824)} GiB RAM`,
    redis: await redisVersion(redisUrl),
    date: new Date().toISOString().slice(0, 10),
  };
}

/**
 * The CPU that hit measurements run on: every case's process (and its threads) is pinned to it, so
 * that both sides of a ratio run on the same core. The cores of a shared VM can differ a lot: on
 * the machines of this project one vCPU ran the same hit loop 1.8x slower than the other, so two
 * processes left to the scheduler gave ratios anywhere between the two.
 */
export const HIT_CPU = availableParallelism() - 1;

/**
 * Pins process `pid` (all its threads, and those it starts later) to {@link HIT_CPU} with
 * `taskset` (util-linux). Returns the CPU, or `undefined` where that is not possible.
 */
export function pinToHitCpu(pid) {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(HIT_CPU), String(pid)], { stdio: 'ignore' });
    return HIT_CPU;
  } catch {
    return undefined;
  }
}

/**
 * Pins this process (all its threads, and those it starts later) to {@link HIT_CPU} until the
 * returned `restore` puts back the CPUs it ran on before, for a scenario whose libraries all run in
 * this process. `cpu` is `undefined` (and `restore` does nothing) where `taskset` is unavailable.
 */
export function pinThisProcess() {
  const pid = String(process.pid);
  let before;
  try {
    // "pid 123's current affinity list: 0,1"
    before = execFileSync('taskset', ['-c', '-p', pid], { encoding: 'utf8' }).split(':').pop().trim();
  } catch {
    return { cpu: undefined, restore() {} };
  }
  const cpu = pinToHitCpu(process.pid);
  return {
    cpu,
    restore() {
      if (cpu === undefined) return;
      try {
        execFileSync('taskset', ['-a', '-p', '-c', before, pid], { stdio: 'ignore' });
      } catch {
        // Left pinned: the later scenarios run on one CPU (their tables do not depend on it).
      }
    },
  };
}
