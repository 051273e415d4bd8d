import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The property test runs hundreds of schedules; a shared, loaded machine must not time it out.
    testTimeout: 30_000,
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
  },
});
