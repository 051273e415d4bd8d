import { defineConfig } from 'vitest/config';

// Every test file starts real server processes: run the files one after another on shared CPUs.
export default defineConfig({
  test: {
    include: ['test/**/*.test.mjs'],
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
