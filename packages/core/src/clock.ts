// Date.now() costs tens of nanoseconds on some virtual machines' clock sources: more than the rest
// of a cache hit. Hits read a clock cached for at most `RESOLUTION_MS` (the technique lru-cache's
// `ttlResolution` uses), so a value may be served up to that long, plus any event-loop stall, past
// its freshness. Everything that writes or schedules uses Date.now() itself.
const RESOLUTION_MS = 1;

let cached = 0;

function forget(): void {
  cached = 0;
}

/** Milliseconds since the epoch, at most about a millisecond old. */
export function coarseNow(): number {
  if (cached !== 0) return cached;
  cached = Date.now();
  const timer = setTimeout(forget, RESOLUTION_MS);
  (timer as { unref?: () => void }).unref?.();
  return cached;
}
