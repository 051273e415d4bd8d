// Scenario 6: Redis commands per hit and per miss, from `INFO commandstats` deltas. Misses are
// cold keys read one after another (no contention); hits re-read them. The Redis may be shared,
// so each figure is the round with the fewest commands (other clients can only add). Then a race:
// two instances on separate ioredis clients, the second asking while the first fills, counted as
// the commands the second's own clients send (its subscriber connection left out).
import { config } from '../config.mjs';
import { redisVariants } from '../peers/index.mjs';
import {
  cleanPrefix,
  commandDelta,
  commandStats,
  connect,
  countSentCommands,
  createOwned,
  isClockScript,
  randomPrefix,
} from '../redis.mjs';
import { progress, sleep, table } from '../stats.mjs';

const CONCURRENT = 250;
// The race: the first instance's fill takes RACE_FILL ms; the second asks RACE_START ms after the
// first; entries live RACE_TTL ms, so the key can be refilled (a hot key's next herd) soon after.
const RACE_FILL = 30;
const RACE_START = 10;
const RACE_TTL = 300;
// Commands only a subscriber connection sends: never a round trip of a call.
const SUBSCRIBER_COMMANDS = new Set([
  'subscribe',
  'unsubscribe',
  'psubscribe',
  'punsubscribe',
  'ssubscribe',
  'ping',
]);

function perOp(delta, ops) {
  const total = Object.values(delta).reduce((a, b) => a + b, 0) / ops;
  const parts = Object.entries(delta)
    .sort((a, b) => b[1] - a[1])
    .map(([command, calls]) => `${command} ${+(calls / ops).toFixed(2)}`);
  return { total, text: parts.join(', ') || 'none' };
}

async function measure(admin, sent, ops, work) {
  const before = await commandStats(admin);
  const sentBefore = { ...sent.counts };
  await work();
  await sleep(50); // let fire-and-forget commands (lock release, publish) land
  const server = perOp(commandDelta(before, await commandStats(admin)), ops);
  const client = perOp(commandDelta(sentBefore, sent.counts), ops);
  return { ...server, sent: client };
}

/**
 * One race on `key`: `holder` starts a fill, `loser` asks `RACE_START` ms later. Counts the commands
 * the loser's own clients sent (a subscriber connection's left out) until its answer.
 */
async function race(sent, subscribers, holder, loser, key) {
  const tally = {};
  let counting = false;
  const unwatch = sent.watch((client, name, command) => {
    if (!counting || !loser.owned.has(client) || subscribers.has(client) || SUBSCRIBER_COMMANDS.has(name))
      return;
    if (isClockScript(name, command)) return;
    tally[name] = (tally[name] ?? 0) + 1;
  });
  let loserFilled = false;
  const holding = holder.instance.get(key, () => sleep(RACE_FILL).then(() => ({ count: 1 })));
  await sleep(RACE_START);
  counting = true;
  await loser.instance.get(key, () => {
    loserFilled = true;
    return { count: 1 };
  });
  counting = false;
  unwatch();
  await holding;
  return { ...perOp(tally, 1), loserFilled };
}

export async function commandsScenario({ url }) {
  const { rounds, misses, hits } = config.commands;
  const prefix = randomPrefix();
  const admin = connect(url);
  const rows = [];
  const concurrentRows = [];
  const raceRows = [];
  const sent = countSentCommands();
  // Clients that subscribed: their commands are no call's round trips.
  const subscribers = new Set();
  const unwatchSubscribers = sent.watch((client, name) => {
    if (name === 'subscribe' || name === 'psubscribe' || name === 'ssubscribe') subscribers.add(client);
  });
  try {
    for (const variant of redisVariants) {
      let instance;
      try {
        instance = await variant.create({ url, prefix, ttlMs: 60_000 });
      } catch (error) {
        const reason =
          variant.peer.id === 'stampede'
            ? 'stampede redis adapter not available'
            : error instanceof Error
              ? error.message
              : String(error);
        rows.push([variant.label, reason, '', '', '', '', '']);
        concurrentRows.push([variant.label, reason, '', '']);
        raceRows.push([variant.label, reason, '', '', '']);
        continue;
      }
      const fill = () => ({ count: 1 });
      let bestMiss;
      let bestHit;
      let bestHerd;
      let bestHot;
      for (let round = 0; round < rounds; round++) {
        const keys = Array.from({ length: misses }, (_, i) => `commands:${round}:${i}`);
        await instance.get(`warm:${round}`, fill); // first use may open connections or load scripts
        await sleep(20);
        const miss = await measure(admin, sent, misses, async () => {
          for (const key of keys) await instance.get(key, fill);
        });
        const hit = await measure(admin, sent, hits, async () => {
          for (let i = 0; i < hits; i++) await instance.get(keys[i % misses], fill);
        });
        const herdKey = `commands:${round}:herd`;
        const slowFill = () => sleep(20).then(() => ({ count: 1 }));
        const herd = await measure(admin, sent, 1, () =>
          Promise.all(Array.from({ length: CONCURRENT }, () => instance.get(herdKey, slowFill))),
        );
        const hot = await measure(admin, sent, 1, () =>
          Promise.all(Array.from({ length: CONCURRENT }, () => instance.get(herdKey, fill))),
        );
        if (bestHerd === undefined || herd.total < bestHerd.total) bestHerd = herd;
        if (bestHot === undefined || hot.total < bestHot.total) bestHot = hot;
        if (bestMiss === undefined || miss.total < bestMiss.total) bestMiss = miss;
        if (bestHit === undefined || hit.total < bestHit.total) bestHit = hit;
      }
      await instance.close();
      // The race: a second instance (another replica) asks while the first fills; then the entry
      // expires and the same pair races again (a hot key's next herd).
      let bestFirst;
      let bestAgain;
      for (let round = 0; round < rounds; round++) {
        const make = () => createOwned(() => variant.create({ url, prefix, ttlMs: RACE_TTL }));
        const holder = await make();
        const loser = await make();
        try {
          await holder.instance.get(`race-warm:${round}:a`, fill);
          await loser.instance.get(`race-warm:${round}:b`, fill);
          await sleep(20);
          const key = `race:${round}`;
          const first = await race(sent, subscribers, holder, loser, key);
          await sleep(RACE_TTL + 50);
          const again = await race(sent, subscribers, holder, loser, key);
          if (bestFirst === undefined || first.total < bestFirst.total) bestFirst = first;
          if (bestAgain === undefined || again.total < bestAgain.total) bestAgain = again;
        } finally {
          await holder.instance.close();
          await loser.instance.close();
        }
      }
      const raceTrips = (m) =>
        variant.peer.id === 'cache-manager' ? 'n/a (node-redis)' : m.total.toFixed(0);
      raceRows.push([
        variant.label,
        raceTrips(bestFirst),
        raceTrips(bestAgain),
        bestAgain.text,
        bestFirst.loserFilled || bestAgain.loserFilled ? 'yes' : 'no',
      ]);
      const trips = (m) =>
        variant.peer.id === 'cache-manager' ? 'n/a (node-redis)' : m.sent.total.toFixed(2);
      rows.push([
        variant.label,
        bestMiss.total.toFixed(2),
        trips(bestMiss),
        bestMiss.text,
        bestHit.total.toFixed(2),
        trips(bestHit),
        bestHit.text,
      ]);
      concurrentRows.push([
        variant.label,
        bestHerd.total.toFixed(0),
        bestHerd.text,
        bestHot.total.toFixed(0),
      ]);
      progress(`commands: ${variant.label} done`);
    }
  } finally {
    unwatchSubscribers();
    sent.stop();
    await cleanPrefix(admin, prefix);
    await admin.quit();
  }
  const markdown = [
    `### 6. Redis commands per miss and per hit (INFO commandstats deltas, ${misses} misses and ${hits} hits, fewest of ${rounds} rounds)`,
    '',
    table(
      [
        'library',
        'commands per miss',
        'sent per miss',
        'miss: commands Redis ran',
        'commands per hit',
        'sent per hit',
        'hit: commands Redis ran',
      ],
      rows,
      ['l', 'r', 'r', 'l', 'r', 'r', 'l'],
    ),
    '',
    `Concurrent calls on one key: ${CONCURRENT} callers at once on a missing key (20 ms fill), then ${CONCURRENT} at once on the filled key.`,
    '',
    table(
      [
        'library',
        `commands for a cold herd of ${CONCURRENT}`,
        'which',
        `commands for ${CONCURRENT} concurrent hits`,
      ],
      concurrentRows,
      ['l', 'r', 'l', 'r'],
    ),
    '',
    `A second replica on the same key: two instances on separate ioredis clients; the second asks ${RACE_START} ms after the first, whose fill takes ${RACE_FILL} ms. Commands its own clients sent until its answer (its subscriber connection left out, and stampede's background measurement of the server clock: no call waits on them), fewest of ${rounds} rounds; then the entry expires (${RACE_TTL} ms) and the pair races again on the same key.`,
    '',
    table(
      [
        'library',
        'second replica: sent (first race on the key)',
        'sent (the key refilled)',
        'which (refilled)',
        'second replica filled too',
      ],
      raceRows,
      ['l', 'r', 'r', 'l', 'l'],
    ),
    '',
    '"commands" are `INFO commandstats` deltas, which count the commands Lua scripts run; "sent" are the commands the client sent (round trips, counted in the bench\'s ioredis clients).',
  ].join('\n');
  return { markdown, targets: [] };
}
