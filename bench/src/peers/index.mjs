// Every contender, this project first and the no-protection baseline last.
import asyncCacheDedupe from './async-cache-dedupe.mjs';
import baseline from './baseline.mjs';
import bentocache from './bentocache.mjs';
import cacheManager from './cache-manager.mjs';
import cachified from './cachified.mjs';
import stampede from './stampede.mjs';

export const peers = [stampede, bentocache, cachified, cacheManager, asyncCacheDedupe, baseline];

/** Every Redis variant, by id. */
export const redisVariants = peers.flatMap((peer) => peer.redis.map((variant) => ({ ...variant, peer })));

/** Every variant on Upstash's REST API (a local server in front of the same Redis), by id. */
export const upstashVariants = peers.flatMap((peer) =>
  (peer.upstash ?? []).map((variant) => ({ ...variant, peer, upstash: true })),
);

/** The fleet scenario's contenders: the Redis variants, then the Upstash ones. */
export const fleetVariants = [...redisVariants, ...upstashVariants];

export function fleetVariant(id) {
  const found = fleetVariants.find((variant) => variant.id === id);
  if (found === undefined) throw new Error(`unknown fleet variant ${id}`);
  return found;
}
