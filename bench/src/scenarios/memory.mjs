// Scenario 7: memory. 1,000,000 distinct keys through getOrCompute on a cache of max 10,000, in a
// fresh child process: the in-flight registry ends empty and heap growth is bounded by the cache's
// max (it stops growing once the cache is full).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { config } from '../config.mjs';
import { ms, progress, table } from '../stats.mjs';

const childPath = fileURLToPath(new URL('../memory-child.mjs', import.meta.url));
const mb = (bytes) => `${(bytes / 1_048_576).toFixed(1)} MB`;

/** Heap growth allowed once the cache is full (it should be ~0: nothing may grow with the keys). */
const FULL_GROWTH_LIMIT = 4 * 1_048_576;
/** Heap allowed per entry the cache may hold. */
const PER_ENTRY_LIMIT = 1_024;

export async function memoryScenario() {
  const { keys, max, batch } = config.memory;
  progress(`memory: ${keys.toLocaleString('en-US')} keys into a cache of max ${max.toLocaleString('en-US')}`);
  const result = await new Promise((resolve, reject) => {
    const child = fork(childPath, [], {
      execArgv: ['--expose-gc'],
      env: {
        ...process.env,
        MEMORY_KEYS: String(keys),
        MEMORY_MAX: String(max),
        MEMORY_BATCH: String(batch),
      },
    });
    child.once('message', resolve);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`memory child exited with ${code}`)));
  });
  const total = result.after - result.before;
  const sinceFull = result.after - result.checkpoint;
  const rows = [
    ['keys filled', result.keys.toLocaleString('en-US')],
    [
      'cache max / size at the end',
      `${result.max.toLocaleString('en-US')} / ${result.size.toLocaleString('en-US')}`,
    ],
    ['inFlightCount(cache) at the end', String(result.inFlight)],
    ['heapUsed before (after gc)', mb(result.before)],
    ['heapUsed once the cache is made (empty)', mb(result.created)],
    [
      `heapUsed after ${result.checkpointAt.toLocaleString('en-US')} keys (cache full)`,
      mb(result.checkpoint),
    ],
    ['heapUsed after all keys', mb(result.after)],
    ['growth: total / per cache entry', `${mb(total)} / ${Math.round(total / result.max)} B`],
    [
      `growth from ${result.checkpointAt.toLocaleString('en-US')} to ${result.keys.toLocaleString('en-US')} keys`,
      mb(sinceFull),
    ],
    [
      'time (throughput)',
      `${ms(result.took)} (${Math.round(result.keys / (result.took / 1_000)).toLocaleString('en-US')} fills/s)`,
    ],
  ];
  const markdown = [
    `### 7. Memory (${result.keys.toLocaleString('en-US')} distinct keys through getOrCompute, createMemoryCache({ max: ${result.max.toLocaleString('en-US')} }), batches of ${batch.toLocaleString('en-US')} concurrent calls)`,
    '',
    table(['measure', 'value'], rows, ['l', 'r']),
  ].join('\n');
  const targets = [
    {
      name: 'memory: in-flight registry empty at the end',
      met: result.inFlight === 0,
      detail: `inFlightCount = ${result.inFlight}`,
    },
    {
      name: `memory: heap bounded by max (<= ${PER_ENTRY_LIMIT} B per entry, < ${mb(FULL_GROWTH_LIMIT)} growth once full)`,
      met:
        result.size <= result.max && total <= result.max * PER_ENTRY_LIMIT && sinceFull < FULL_GROWTH_LIMIT,
      detail: `${mb(total)} total, ${mb(sinceFull)} after the cache was full, size ${result.size}`,
    },
  ];
  return { markdown, targets };
}
