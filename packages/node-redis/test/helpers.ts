import { testRedis } from '@stampede/test-support';
import { createClient } from 'redis';

/** A connected node-redis client on the test Redis (errors are the test's to observe, not thrown). */
export async function connectedClient() {
  const client = createClient({ url: (await testRedis()).url });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Deletes every key under `prefix` (SCAN + UNLINK) through node-redis. */
export async function deletePrefixWith(client: Awaited<ReturnType<typeof connectedClient>>, prefix: string) {
  for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
    if (keys.length > 0) await client.unlink(keys);
  }
}
