// What the run ran on, for the report header.
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
