import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test starts workerd or an edge runtime and bundles an example: seconds, not milliseconds.
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
