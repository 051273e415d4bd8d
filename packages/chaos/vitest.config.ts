import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.chaos.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Real processes and latency bounds on a shared machine: one file at a time.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
