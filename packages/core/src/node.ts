// The entry point for runtimes that resolve the `node` export condition (Node, Bun, Deno). It adds
// what only they offer to the runtime-neutral entry: an AsyncLocalStorage, so that a fill that calls
// `getOrCompute` on its own key fails at once instead of waiting for itself forever.
import { AsyncLocalStorage } from 'node:async_hooks';
import { useAsyncContext } from './fill-context.js';
import type { FillFrame } from './shared.js';

useAsyncContext(() => new AsyncLocalStorage<FillFrame>());

export * from './index.js';
