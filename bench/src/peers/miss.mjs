/**
 * The fill the hit loops pass: it answers `{ count: 0 }`, so a loop's sum equals its iterations only
 * when every call was a hit (the keys were primed with `{ count: 1 }`).
 */
export const miss = () => ({ count: 0 });
