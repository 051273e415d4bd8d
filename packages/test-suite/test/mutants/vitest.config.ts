import { defineConfig } from 'vitest/config';

// Runs one mutant's suite (see mutants.test.ts): not part of the package's own test run.
export default defineConfig({
  test: {
    include: ['test/mutants/run.mutant.ts'],
  },
});
