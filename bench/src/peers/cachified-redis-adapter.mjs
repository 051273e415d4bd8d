// A cachified Cache over ioredis (cachified ships none for ioredis): the entry as JSON, expiring
// at createdTime + ttl + swr like cachified's own redis adapters.
import { totalTtl } from '@epic-web/cachified';

export function ioredisCacheAdapter(client, prefix) {
  return {
    name: 'ioredis',
    async get(key) {
      const text = await client.get(prefix + key);
      return text === null ? null : JSON.parse(text);
    },
    async set(key, entry) {
      const ttl = totalTtl(entry?.metadata);
      const text = JSON.stringify(entry);
      if (ttl === Number.POSITIVE_INFINITY) return client.set(prefix + key, text);
      const remaining = Math.ceil(entry.metadata.createdTime + ttl - Date.now());
      if (remaining <= 0) return undefined;
      return client.set(prefix + key, text, 'PX', remaining);
    },
    delete(key) {
      return client.del(prefix + key);
    },
  };
}
