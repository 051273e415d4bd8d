// Scenario 12: a replica shut down while it fills. Replica A (its own ioredis connection) holds the
// fleet's lock on a key and fills it; mid-fill it shuts down as the README says (`await
// cache.close(); await client.quit()`). Replica B's callers (another connection) ask for the key
// meanwhile. With `close()` waiting for the cache's work (`whenIdle`), A's value is stored and its
// lock released and announced: B answers with it. `close({ timeout: 0 })` is the close that does
// not wait (as before this release): A's write and release go to a client that has quit, the lock
// stays until `lockTtl`, and B waits out `lockWaitTimeout` and fills again. No peer has a fleet
// lock, so there is nothing of theirs to compare.
import { getOrComputeWith } from '@stampede/core';
import { config } from '../config.mjs';
import { cleanPrefix, connect, randomPrefix } from '../redis.mjs';
import { median, ms, progress, sleep, table } from '../stats.mjs';

const FILL_MS = 200;
const LOCK_WAIT_TIMEOUT_MS = 1_000;

async function shutDownMidFill(createRedisCache, url, prefix, key, closeOptions, callers) {
  const options = { ttl: 60_000, distributedFillLock: true, lockWaitTimeout: LOCK_WAIT_TIMEOUT_MS };
  const clientA = connect(url);
  const clientB = connect(url);
  const a = createRedisCache({ client: clientA, prefix, name: 'bench-shutdown-a' });
  const b = createRedisCache({ client: clientB, prefix, name: 'bench-shutdown-b' });
  await Promise.all([clientA.ping(), clientB.ping()]);
  let started;
  const filling = new Promise((resolve) => {
    started = resolve;
  });
  const held = getOrComputeWith(a, key, options, async () => {
    started();
    await sleep(FILL_MS);
    return 'from A';
  });
  await filling;
  const closing = (async () => {
    await a.close(closeOptions);
    await clientA.quit();
  })();
  let fills = 0;
  const t0 = performance.now();
  const answers = await Promise.all(
    Array.from({ length: callers }, () =>
      getOrComputeWith(b, key, options, () => {
        fills++;
        return 'from B';
      }),
    ),
  );
  const slowest = performance.now() - t0;
  await Promise.all([held, closing]);
  await b.close();
  clientB.disconnect();
  return { fills, slowest, fromA: answers.filter((answer) => answer === 'from A').length };
}

export async function shutdownScenario({ url }) {
  let createRedisCache;
  try {
    ({ createRedisCache } = await import('@stampede/redis'));
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return { markdown: `### 12. Replica shut down mid-fill: not run (${reason})`, targets: [] };
  }
  const { rounds, callers } = config.shutdown;
  const variants = [
    { label: 'stampede, close() (waits for the fill, at most 5 s)', closeOptions: undefined, results: [] },
    { label: 'stampede, close({ timeout: 0 }) (does not wait)', closeOptions: { timeout: 0 }, results: [] },
  ];
  const prefix = randomPrefix();
  const admin = connect(url);
  try {
    for (let round = 0; round < rounds; round++) {
      for (const variant of variants) {
        const key = `shutdown:${round}:${variant.closeOptions === undefined ? 'wait' : 'nowait'}`;
        variant.results.push(
          await shutDownMidFill(createRedisCache, url, prefix, key, variant.closeOptions, callers),
        );
      }
      progress(`shutdown: round ${round + 1}/${rounds} done`);
    }
  } finally {
    await cleanPrefix(admin, prefix);
    admin.disconnect();
  }
  const rows = variants.map(({ label, results }) => [
    label,
    String(median(results.map((r) => r.fills))),
    `${median(results.map((r) => r.fromA))} / ${callers}`,
    ms(median(results.map((r) => r.slowest))),
  ]);
  const markdown = [
    `### 12. Replica shut down mid-fill (A fills for ${FILL_MS} ms holding the lock and shuts down; ${callers} callers on replica B; lockWaitTimeout ${ms(LOCK_WAIT_TIMEOUT_MS)}; ${rounds} rounds; no peer has a fleet lock)`,
    '',
    table(
      ['variant', "B's fills (median)", "B's callers answered with A's value", "B's slowest caller"],
      rows,
      ['l', 'r', 'r', 'r'],
    ),
  ].join('\n');
  return { markdown, targets: [] };
}
