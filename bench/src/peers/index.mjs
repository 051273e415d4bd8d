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

export function redisVariant(id) {
  const found = redisVariants.find((variant) => variant.id === id);
  if (found === undefined) throw new Error(`unknown redis variant ${id}`);
  return found;
}
