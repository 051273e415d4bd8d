// Scenario 4: a fleet on one Redis. P real child processes x C callers each ask for one missing key
// at the same moment (a barrier: every child is prepared, then all get 'go'). Reports total fills
// and p50/p99 caller latency for stampede (lock + push wake-up, lock + polling only, no lock), each
// peer with its Redis store, and the no-protection baseline; then stampede's Upstash cache (lock + push
// wake-up, lock + polling only) through a local Upstash REST server, started here, in front of the
// same Redis.
import { fileURLToPath } from 'node:url';
import { startChild } from '../child.mjs';
import { config } from '../config.mjs';
import { fleetVariants } from '../peers/index.mjs';
import { cleanPrefix, connect, randomPrefix } from '../redis.mjs';
import { median, ms, percentile, progress, ratio, rotate, table } from '../stats.mjs';
import { fillsText } from './herd.mjs';

const childPath = fileURLToPath(new URL('../fleet-child.mjs', import.meta.url));

export async function fleetScenario({ url }) {
  const { rounds, processes, callers, fillMs } = config.fleet;
  const prefix = randomPrefix();
  const ids = fleetVariants
    .map((v) => v.id)
    .filter((id) => config.fleet.variants.length === 0 || config.fleet.variants.includes(id));
  const upstashIds = fleetVariants.filter((v) => v.upstash && ids.includes(v.id)).map((v) => v.id);
  const restServer = upstashIds.length > 0 ? await startRestServer(url) : undefined;
  progress(`fleet: starting ${processes} child processes (prefix ${prefix})`);
  const children = Array.from({ length: processes }, () =>
    startChild(childPath, { execArgv: config.fleet.childExecArgv }),
  );
  const admin = connect(url);
  const results = Object.fromEntries(ids.map((id) => [id, []]));
  // The second pass, on a 1 ms fill: results by variant.
  const fast = {};
  const { fastFillMs } = config.fleet;
  // Each variant's first herd after the processes started (round -1): cold, as after a deploy.
  const cold = {};
  let unavailable = {};
  try {
    const setups = await Promise.all(
      children.map(({ ask }) =>
        ask(
          { type: 'setup', url, upstash: restServer?.client, prefix, variants: ids, ttlMs: 60_000 },
          'setup-done',
        ),
      ),
    );
    unavailable = Object.assign({}, ...setups.map((s) => s.unavailable));
    if (restServer?.error !== undefined) {
      for (const id of upstashIds) unavailable[id] = `no local Upstash REST server: ${restServer.error}`;
    }
    const runnable = ids.filter((id) => unavailable[id] === undefined);
    // Round -1 warms up (connections, subscriber, scripts) and is not recorded.
    for (let round = -1; round < rounds; round++) {
      for (const id of rotate(runnable, Math.max(0, round))) {
        const result = await herd(children, { variant: id, key: `fleet:${round}`, callers, fillMs });
        if (round >= 0) results[id].push(result);
        else cold[id] = result;
        progress(
          `fleet: ${round < 0 ? 'warm-up ' : ''}${id}: ${result.fills} fills, p50 ${ms(result.p50)}, p99 ${ms(result.p99)}, fill ${ms(result.fillTook)}`,
        );
      }
      if (round >= 0) progress(`fleet: round ${round + 1}/${rounds} done`);
    }
    // The same processes, warm, on a fill of 1 ms: a holder may finish while a loser is still
    // between its lost lock attempt and its subscription (issue: the subscribe race).
    for (let round = 0; round < config.fleet.fastRounds; round++) {
      for (const id of rotate(
        runnable.filter((v) => !upstashIds.includes(v)),
        round,
      )) {
        const result = await herd(children, {
          variant: id,
          key: `fleet-fast:${round}`,
          callers,
          fillMs: fastFillMs,
        });
        fast[id] ??= [];
        fast[id].push(result);
      }
      progress(`fleet: 1 ms fill round ${round + 1}/${config.fleet.fastRounds} done`);
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await restServer?.close();
  }
  // More cold starts of the push variant, each in fresh processes: one herd per start.
  const coldSamples = [];
  try {
    if (ids.includes('stampede-push') && unavailable['stampede-push'] === undefined) {
      for (let start = 0; start < config.fleet.coldStarts; start++) {
        coldSamples.push(await coldStart(childPath, { url, prefix, callers, fillMs, start }));
        progress(`fleet: cold start ${start + 1}/${config.fleet.coldStarts} done`);
      }
    }
  } finally {
    const removed = await cleanPrefix(admin, prefix);
    progress(`fleet: removed ${removed} keys under ${prefix}`);
    await admin.quit();
  }
  const rows = fleetVariants
    .filter(({ id }) => ids.includes(id))
    .map(({ id, label, peer, upstash }) => {
      if (unavailable[id] !== undefined) {
        const reason =
          peer.id === 'stampede' && !upstash ? 'stampede redis adapter not available' : unavailable[id];
        return [label, reason, '', '', '', ''];
      }
      const rs = results[id];
      const p99 = median(rs.map((r) => r.p99));
      const errors = rs.reduce((sum, r) => sum + r.errors, 0);
      return [
        label,
        fillsText(rs.map((r) => r.fills)) + (errors > 0 ? ` (${errors} caller errors)` : ''),
        ms(median(rs.map((r) => r.p50))),
        ms(p99),
        ms(median(rs.map((r) => r.max))),
        ratio(p99 / fillMs),
      ];
    });
  const push = results['stampede-push'];
  const targets = [];
  if (!ids.includes('stampede-push')) {
    // Not run (BENCH_FLEET_VARIANTS): no target to judge.
  } else if (unavailable['stampede-push'] !== undefined || push.length === 0) {
    targets.push({
      name: 'fleet with the lock: 1 fill in total, p99 within fill time + 25 ms (push)',
      met: false,
      detail: 'stampede redis adapter not available',
    });
  } else {
    const maxFills = Math.max(...push.map((r) => r.fills));
    const beyond = median(push.map((r) => r.p99 - r.fillTook));
    targets.push({
      name: 'fleet with the lock: 1 fill in total, p99 within fill time + 25 ms (push wake-up)',
      met: maxFills === 1 && beyond <= 25,
      detail: `${maxFills} fill(s) at most per round, p99 ${ms(beyond)} beyond the fill`,
    });
    // The slowest caller of all, across the processes (the Redis adapter's own target).
    const slowest = median(push.map((r) => r.max - r.fillTook));
    targets.push({
      name: `fleet with the lock: the slowest of ${processes * callers} callers within fill time + 25 ms (push wake-up)`,
      met: slowest <= 25,
      detail: `slowest caller ${ms(slowest)} beyond the fill (median of ${push.length} rounds)`,
    });
    const starts = [cold['stampede-push'], ...coldSamples].filter((r) => r !== undefined);
    if (starts.length > 0) {
      const beyondEach = starts.map((r) => r.max - r.fillTook);
      const coldBeyond = median(beyondEach);
      const maxFills = Math.max(...starts.map((r) => r.fills));
      targets.push({
        name: 'fleet cold start: the first herd after the processes start, slowest caller within fill time + 25 ms (push wake-up)',
        met: maxFills === 1 && coldBeyond <= 25,
        detail: `slowest caller ${ms(coldBeyond)} beyond the fill cold (median of ${starts.length} starts, ${ms(Math.min(...beyondEach))} .. ${ms(Math.max(...beyondEach))}), ${ms(slowest)} warm; ${maxFills} fill(s) at most`,
      });
    }
  }
  const tiered = results['stampede-tiered'];
  if (ids.includes('stampede-tiered')) {
    const name = `tiered fleet (${processes} x ${callers}, lock): 1 fill, slowest caller within fill + 25 ms`;
    if (unavailable['stampede-tiered'] !== undefined || tiered.length === 0) {
      targets.push({ name, met: false, detail: unavailable['stampede-tiered'] ?? 'not run' });
    } else {
      const maxFills = Math.max(...tiered.map((r) => r.fills));
      const slowest = median(tiered.map((r) => r.max - r.fillTook));
      targets.push({
        name,
        met: maxFills === 1 && slowest <= 25,
        detail: `${maxFills} fill(s) at most per round, slowest caller ${ms(slowest)} beyond the fill (median of ${tiered.length} rounds)`,
      });
    }
  }
  targets.push(...upstashTargets(ids, unavailable, results['stampede-upstash-push'], processes * callers));
  const fastPush = fast['stampede-push'];
  if (fastPush !== undefined) {
    const maxFills = Math.max(...fastPush.map((r) => r.fills));
    const slowest = median(fastPush.map((r) => r.max - r.fillTook));
    targets.push({
      name: `fleet with a ${fastFillMs} ms fill (lock + push wake-up, ${processes} x ${callers}): 1 fill, slowest caller within fill + 10 ms`,
      met: maxFills === 1 && slowest <= 10,
      detail: `${maxFills} fill(s) at most per round, slowest caller ${ms(slowest)} beyond the fill (median of ${fastPush.length} rounds)`,
    });
  }
  const fastRows = fleetVariants
    .filter(({ id }) => fast[id] !== undefined)
    .map(({ id, label }) => {
      const rs = fast[id];
      return [
        label,
        fillsText(rs.map((r) => r.fills)),
        ms(median(rs.map((r) => r.p50))),
        ms(median(rs.map((r) => r.p99))),
        ms(median(rs.map((r) => r.max))),
        ms(median(rs.map((r) => r.max - r.fillTook))),
      ];
    });
  const markdown = [
    `### 4. Fleet on one Redis (${processes} processes x ${callers} callers, ${fillMs} ms fill, ${rounds} rounds)`,
    '',
    table(
      [
        'library',
        'total fills per herd',
        'p50 caller latency (median)',
        'p99 caller latency (median)',
        'slowest caller (median)',
        'p99 / fill time',
      ],
      rows,
      ['l', 'r', 'r', 'r', 'r', 'r'],
    ),
    ...coldLine(cold, ids, unavailable, coldSamples),
    ...(fastRows.length > 0
      ? [
          '',
          `#### 4b. The same fleet on a ${fastFillMs} ms fill (${config.fleet.fastRounds} rounds, warm; Redis variants)`,
          '',
          table(
            [
              'library',
              'total fills per herd',
              'p50 caller latency (median)',
              'p99 caller latency (median)',
              'slowest caller (median)',
              'slowest caller beyond the fill (median)',
            ],
            fastRows,
            ['l', 'r', 'r', 'r', 'r', 'r'],
          ),
        ]
      : []),
    ...(upstashIds.length > 0
      ? [
          '',
          'The "stampede upstash" rows run `@stampede/upstash` over HTTP (`@upstash/redis`) to a local Upstash REST server (`@stampede/upstash-rest-server`, one Node process started by the bench) in front of the same Redis; push wake-up is a server-sent-event subscription per waiting call.',
        ]
      : []),
  ].join('\n');
  return { markdown, targets };
}

/**
 * One herd: every child prepares `callers` callers of `variant` on `key`, then all are told 'go' at
 * once. Total fills, the longest fill, caller errors and the callers' latencies (p50, p99, slowest).
 */
async function herd(children, { variant, key, callers, fillMs }) {
  await Promise.all(
    children.map(({ ask }) => ask({ type: 'prepare', variant, key, callers, fillMs }, 'prepared')),
  );
  const answers = children.map(({ next }) => next('result', 60_000));
  for (const { child } of children) child.send({ type: 'go' });
  const reports = await Promise.all(answers);
  const latencies = reports.flatMap((r) => r.latencies);
  return {
    fills: reports.reduce((sum, r) => sum + r.fills, 0),
    fillTook: Math.max(0, ...reports.flatMap((r) => r.fillTook)),
    errors: reports.reduce((sum, r) => sum + r.errors, 0),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: Math.max(...latencies),
  };
}

/**
 * Starts `processes` fresh children with the push variant alone, runs one herd on a new key (their
 * first) and stops them: a cold start as after a deploy.
 */
async function coldStart(childPath, { url, prefix, callers, fillMs, start }) {
  const children = Array.from({ length: config.fleet.processes }, () =>
    startChild(childPath, { execArgv: config.fleet.childExecArgv }),
  );
  try {
    await Promise.all(
      children.map(({ ask }) =>
        ask({ type: 'setup', url, prefix, variants: ['stampede-push'], ttlMs: 60_000 }, 'setup-done'),
      ),
    );
    return await herd(children, { variant: 'stampede-push', key: `fleet-cold:${start}`, callers, fillMs });
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

/**
 * One line giving each stampede variant's slowest caller in the first herd after the processes
 * started (cold: round -1, not in the table), beside the table's warm figures.
 */
function coldLine(cold, ids, unavailable, samples) {
  const parts = fleetVariants
    .filter(({ id, peer }) => peer.id === 'stampede' && ids.includes(id) && unavailable[id] === undefined)
    .filter(({ id }) => cold[id] !== undefined)
    .map(({ id, label }) => `${label} ${ms(cold[id].max - cold[id].fillTook)}`);
  if (parts.length === 0) return [];
  const starts = [cold['stampede-push'], ...samples]
    .filter((r) => r !== undefined)
    .map((r) => r.max - r.fillTook);
  const more =
    samples.length === 0
      ? ''
      : ` The push variant started ${samples.length} more times in fresh processes (itself alone, one herd each): over all ${starts.length} starts, median ${ms(median(starts))}, ${ms(Math.min(...starts))} .. ${ms(Math.max(...starts))}.`;
  return [
    '',
    `Cold start (the first herd after the processes start, not counted in the table; slowest caller beyond the fill): ${parts.join('; ')}.${more}`,
  ];
}

/**
 * A local Upstash REST server in front of `url` for the Upstash variants: `{ client, close }`, or
 * `{ error, close }` when it cannot start (those rows then say why).
 */
async function startRestServer(url) {
  try {
    const { startUpstashRestServer } = await import('@stampede/upstash-rest-server/built');
    const server = await startUpstashRestServer({ redisUrl: url });
    progress(`fleet: local Upstash REST server on ${server.url}`);
    await warmRestServer(server);
    return { client: { url: server.url, token: server.token }, close: () => server.close() };
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    progress(`fleet: no local Upstash REST server: ${reason}`);
    return { error: reason, close: async () => {} };
  }
}

/**
 * Sends the local REST server the kinds of request a fleet sends (commands, scripts, a publish, a
 * server-sent-event subscription) before any herd: Upstash is a service that is running already
 * when a replica starts, so the cold-start figure is the replicas' own. Without this the first
 * herd also paid this stand-in server's compilation and its first Redis connections.
 */
async function warmRestServer(server) {
  const { Redis } = await import('@upstash/redis');
  const client = new Redis({ url: server.url, token: server.token, enableTelemetry: false });
  const key = `${randomPrefix()}rest-warm`;
  for (let i = 0; i < 200; i++) {
    await Promise.all([
      client.get(key),
      client.set(key, 'x', { px: 1_000 }),
      client.eval("return redis.call('GET', KEYS[1])", [key], []),
      client.publish(key, 'x'),
    ]);
  }
  for (let i = 0; i < 5; i++) {
    const subscription = client.subscribe(key);
    await new Promise((resolve) => {
      subscription.on('subscribe', resolve);
      setTimeout(resolve, 1_000);
    });
    await subscription.unsubscribe().catch(() => {});
  }
  await client.del(key);
}

/** The Upstash fleet's target: its slowest caller within fill time + 100 ms, one fill in total. */
function upstashTargets(ids, unavailable, push, callers) {
  const name = `Upstash fleet: slowest caller within fill + 100 ms (lock + push wake-up, ${callers} callers)`;
  if (!ids.includes('stampede-upstash-push')) return [];
  if (unavailable['stampede-upstash-push'] !== undefined || push.length === 0) {
    return [{ name, met: false, detail: unavailable['stampede-upstash-push'] ?? 'not run' }];
  }
  const maxFills = Math.max(...push.map((r) => r.fills));
  const slowest = median(push.map((r) => r.max - r.fillTook));
  return [
    {
      name,
      met: maxFills === 1 && slowest <= 100,
      detail: `slowest caller ${ms(slowest)} beyond the fill (median of ${push.length} rounds), ${maxFills} fill(s) at most per round`,
    },
  ];
}
