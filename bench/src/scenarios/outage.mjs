// Scenario 9: the source goes down. A key is filled, then the "database" fails every call (5 ms,
// then a throw) for `outageMs` while readers keep coming (a burst every `everyMs`); then it is back.
// Reports, per library: errors returned to readers during the outage, fill attempts, the readers'
// answer latency, and how long after the database came back the first new value was served.
import { config } from '../config.mjs';
import { median, ms, percentile, progress, rotate, sleep, table } from '../stats.mjs';

async function outageRound(instance, key, { ttlMs, outageMs, everyMs, burst }) {
  let version = 0;
  let down = false;
  let fills = 0;
  const fill = async () => {
    fills++;
    await sleep(5);
    if (down) throw new Error('database down');
    return { version };
  };
  await instance.get(key, fill);
  await sleep(ttlMs + 20); // the value is expired (not fresh) when the outage starts
  down = true;
  fills = 0;
  const latencies = [];
  let errors = 0;
  let answered = 0;
  const pending = [];
  const read = (until) => {
    const start = performance.now();
    const call = Promise.resolve()
      .then(() => instance.get(key, fill))
      .then(
        (value) => {
          answered++;
          latencies.push(performance.now() - start);
          return value;
        },
        () => {
          errors++;
          latencies.push(performance.now() - start);
          return undefined;
        },
      );
    if (until !== undefined) pending.push(call);
    return call;
  };
  const outageEnd = performance.now() + outageMs;
  while (performance.now() < outageEnd) {
    for (let i = 0; i < burst; i++) read(true);
    await sleep(everyMs);
  }
  await Promise.all(pending);
  const outageFills = fills;
  down = false;
  version = 1;
  const back = performance.now();
  let recoveredAfter = Number.NaN;
  while (performance.now() - back < 30_000) {
    const values = await Promise.all(Array.from({ length: burst }, () => read()));
    if (values.some((v) => v?.version === 1)) {
      recoveredAfter = performance.now() - back;
      break;
    }
    await sleep(everyMs);
  }
  return {
    errors,
    answered,
    fills: outageFills,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    recoveredAfter,
  };
}

export async function outageScenario(peers) {
  const { rounds, ttlMs, outageMs, everyMs, burst, backoffMs } = config.outage;
  const contenders = peers.flatMap((peer) =>
    (peer.outage ?? []).map((o) => ({ ...o, instance: o.create({ ttlMs, backoffMs }), results: [] })),
  );
  for (let round = 0; round < rounds; round++) {
    for (const c of rotate(contenders, round)) {
      c.results.push(await outageRound(c.instance, `outage:${round}`, { ttlMs, outageMs, everyMs, burst }));
    }
    progress(`outage: round ${round + 1}/${rounds} done`);
  }
  const reads = Math.ceil(outageMs / everyMs) * burst;
  const rows = contenders.map((c) => [
    c.label,
    c.feature,
    `${median(c.results.map((r) => r.errors)).toLocaleString('en-US')} / ~${reads.toLocaleString('en-US')}`,
    median(c.results.map((r) => r.fills)).toLocaleString('en-US'),
    ms(median(c.results.map((r) => r.p50))),
    ms(median(c.results.map((r) => r.p99))),
    ms(median(c.results.map((r) => r.recoveredAfter))),
  ]);
  const ours = contenders.find((c) => c.label === 'stampede, failSafe');
  const errors = Math.max(...ours.results.map((r) => r.errors));
  const fills = Math.max(...ours.results.map((r) => r.fills));
  const allowed = Math.ceil(outageMs / backoffMs) + 1;
  const recovered = median(ours.results.map((r) => r.recoveredAfter));
  return {
    markdown: [
      `### 9. Source down (ttl ${ms(ttlMs)}, the database fails every call for ${ms(outageMs)}, ${burst} readers every ${everyMs} ms, backoff ${ms(backoffMs)}, ${rounds} rounds)`,
      '',
      table(
        [
          'library',
          'feature used',
          'errors returned during the outage (median)',
          'fill attempts during the outage (median)',
          'p50 answer latency',
          'p99 answer latency',
          'first new value after the database is back',
        ],
        rows,
        ['l', 'l', 'r', 'r', 'r', 'r', 'r'],
      ),
    ].join('\n'),
    targets: [
      {
        name: 'source down with failSafe: 0 errors, at most one fill attempt per throttle, fresh again within one throttle',
        met: errors === 0 && fills <= allowed && recovered <= backoffMs + 50,
        detail: `${errors} errors, ${fills} fill attempts (at most ${allowed}), new value ${ms(recovered)} after the database came back`,
      },
    ],
  };
}
