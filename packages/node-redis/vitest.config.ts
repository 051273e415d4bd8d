import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Unit tests (*.test.ts) and integration tests against real servers and processes (*.int.test.ts).
    include: ['test/**/*.test.ts', 'test/**/*.int.test.ts'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
    // The multi-process tests measure latency: keep other test files from competing for the CPU.
    fileParallelism: false,
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
