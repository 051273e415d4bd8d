import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'] },
    // The integration tests start replica processes and a REST server: on a loaded machine a start
    // alone can take seconds (the 5 s default cut a lock-lapse test short). Their own assertions
    // bound what they measure.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
