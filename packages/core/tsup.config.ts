import { defineConfig } from 'tsup';

export default defineConfig({
  // index: the runtime-neutral entry (edge runtimes); node: the same API plus AsyncLocalStorage, for
  // runtimes that resolve the `node` export condition; adapter: `@stampede/core/adapter`, for adapter
  // authors (one build for every runtime: it holds no fill context).
  entry: ['src/index.ts', 'src/node.ts', 'src/adapter.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  platform: 'neutral',
  external: ['node:async_hooks', 'node:worker_threads'],
  // Keep the `node:` prefix: Deno and Bun resolve builtins by it.
  removeNodeProtocol: false,
});
