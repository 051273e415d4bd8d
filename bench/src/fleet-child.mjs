// One replica of the fleet scenario: a real child process that creates every variant, then on
// each 'prepare' + 'go' fires its callers at one key at once and reports fills and latencies.
import { Redis } from 'ioredis';
import { fleetVariant } from './peers/index.mjs';
import { sleep, startCallers } from './stats.mjs';

// BENCH_FLEET_TRACE=1: every Redis command this process sends (on any connection, the subscriber
// included) with when it was sent and answered, relative to the herd's 'go', printed to stderr for
// the first two herds; for finding where a herd's time goes.
const trace = process.env.BENCH_FLEET_TRACE === '1' ? [] : undefined;
let herds = 0;
if (trace !== undefined) {
  const send = Redis.prototype.sendCommand;
  let connections = 0;
  Redis.prototype.sendCommand = function sendTraced(command, stream) {
    this.traceId ??= ++connections;
    const entry = {
      conn: this.traceId,
      name: command.name,
      arg: String(command.args?.[0] ?? '').slice(0, 12),
      sent: performance.now(),
      done: Number.NaN,
    };
    trace.push(entry);
    const result = send.call(this, command, stream);
    command.promise.then(
      () => {
        entry.done = performance.now();
      },
      () => {
        entry.done = -1;
      },
    );
    return result;
  };
}

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
  // Ready means started: every cache's connections open and its warm-up answered (see `ready` in
  // peers/stampede.mjs), so the first herd is that of a process that has finished starting.
  await Promise.all(
    [...instances.entries()].map(([id, instance]) =>
      instance.ready?.().catch((error) => {
        unavailable[id] = `not ready: ${error instanceof Error ? error.message : String(error)}`;
      }),
    ),
  );
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
  const goAt = performance.now();
  // For lining the trace up with a --cpu-prof profile (its sample times are on this clock, in us).
  const goHr = Number(process.hrtime.bigint() / 1000n);
  const { all, latencies, counts } = startCallers(callers, () => instance.get(key, fill));
  await all;
  if (trace !== undefined && herds++ < 2) {
    const at = (t) => (Number.isNaN(t) ? 'pending' : t < 0 ? 'failed' : (t - goAt).toFixed(1));
    const line = (e) => `  c${e.conn} ${e.name} ${e.arg} sent ${at(e.sent)} done ${at(e.done)}`;
    process.stderr.write(
      `[trace ${process.pid} ${variant} ${key}] go at hrtime ${goHr} us, slowest ${Math.max(...latencies).toFixed(1)} ms, fill ${fillTook.map((t) => t.toFixed(1)).join(',')}\n` +
        `${trace.slice(-60).map(line).join('\n')}\n`,
    );
  }
  trace?.splice(0);
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
