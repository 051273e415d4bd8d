import { defineConfig } from 'tsup';

// A plain-Node build for what runs outside vitest (the benchmarks); tests import the sources.
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm'],
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  platform: 'node',
});
