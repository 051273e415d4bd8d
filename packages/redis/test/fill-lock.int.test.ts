import { randomPrefix, testRedis } from '@stampede/test-support';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { deletePrefix } from './helpers.js';
import { describeLockBehaviour } from './lock-behaviour.js';

const prefix = randomPrefix('redis-lock');
let client: Redis | undefined;

afterAll(async () => {
  if (client !== undefined) {
    await deletePrefix(client, prefix);
    client.disconnect();
  }
  await (await testRedis()).stop();
});

describeLockBehaviour('redis (standalone)', {
  prefix,
  async client() {
    client ??= new Redis((await testRedis()).url);
    return client;
  },
});
