// The reference of the hit scenario: an awaited get on a raw lru-cache, no library around it.
import { LRUCache } from 'lru-cache';

export const rawLru = {
  label: 'raw lru-cache get (awaited)',
  async make(keys) {
    const lru = new LRUCache({ max: 10_000 });
    for (const key of keys) lru.set(key, { count: 1 });
    const len = keys.length;
    return async (n) => {
      let sink = 0;
      for (let i = 0; i < n; i++) sink += (await lru.get(keys[i % len])).count;
      return sink;
    };
  },
};
