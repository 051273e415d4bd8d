import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Unit tests (*.test.ts) and integration tests against a real Redis (*.int.test.ts).
    include: ['test/**/*.test.ts', 'test/**/*.int.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
