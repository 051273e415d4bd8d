import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createContext, runInContext } from 'node:vm';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '..', 'src');
const dist = join(import.meta.dirname, '..', 'dist');
// The entry for the `node` export condition (AsyncLocalStorage); nothing else may import it.
const NODE_ENTRY = 'node.ts';

describe('@stampede/core runs on edge runtimes', () => {
  it('imports nothing from node: and no Node globals (process, Buffer, require)', () => {
    const files = readdirSync(src).filter((f) => f.endsWith('.ts') && f !== NODE_ENTRY);
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const text = readFileSync(join(src, file), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/\/\/.*$/gm, '');
      expect(text, file).not.toMatch(/from ['"]node:/);
      expect(text, file).not.toMatch(/\bimport\(['"]node:/);
      expect(text, file).not.toMatch(/\b(process|Buffer|require|__dirname)\s*[.(]/);
      expect(text, file).not.toMatch(/from ['"]\.\/node\.js['"]/);
    }
  });

  it('the default build and the adapter subpath (what edge bundlers resolve) load nothing from node:', () => {
    // The import/require conditions without `node`: index.js (and the chunks it imports), index.cjs.
    expect(existsSync(join(dist, 'index.js')), 'run the build first').toBe(true);
    const manifest = JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8'));
    expect(manifest.exports['.'].import.default).toBe('./dist/index.js');
    expect(manifest.exports['.'].require.default).toBe('./dist/index.cjs');
    // The adapter subpath has one build for every runtime, so it must be edge-safe as well.
    expect(manifest.exports['./adapter'].import.default).toBe('./dist/adapter.js');
    expect(manifest.exports['./adapter'].require.default).toBe('./dist/adapter.cjs');
    const seen = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(join(dist, file), 'utf8');
      expect(text, file).not.toMatch(/["']node:|require\(["'](async_hooks|fs|path|crypto)["']\)/);
      for (const match of text.matchAll(/from ["']\.\/([^"']+)["']/g)) visit(match[1] as string);
    };
    visit('index.js');
    visit('index.cjs');
    visit('adapter.js');
    visit('adapter.cjs');
    expect(seen.size).toBeGreaterThan(2);
  });

  it('loads and answers where there is no SharedArrayBuffer (a browser page not cross-origin isolated)', async () => {
    // A realm of its own without SharedArrayBuffer, running the CommonJS build with a require that
    // loads its chunks into the same realm. It used to throw a ReferenceError as it loaded.
    // What a browser page offers besides the language (a vm realm has only the language).
    const context = createContext({
      AbortController,
      AbortSignal,
      DOMException,
      Event,
      EventTarget,
      setTimeout,
      clearTimeout,
      queueMicrotask,
      TextEncoder,
      TextDecoder,
      performance,
    });
    runInContext('delete globalThis.SharedArrayBuffer', context);
    expect(runInContext('typeof SharedArrayBuffer', context)).toBe('undefined');
    const modules = new Map<string, unknown>();
    const load = (file: string): unknown => {
      const known = modules.get(file);
      if (known !== undefined) return known;
      const module = { exports: {} as Record<string, unknown> };
      modules.set(file, module.exports);
      const factory = runInContext(
        `(function (module, exports, require) {${readFileSync(join(dist, file), 'utf8')}\n})`,
        context,
      ) as (m: typeof module, e: unknown, r: (name: string) => unknown) => void;
      factory(module, module.exports, (name) => {
        if (!name.startsWith('./')) throw new Error(`unexpected require of ${name}`);
        return load(name.slice(2));
      });
      modules.set(file, module.exports);
      return module.exports;
    };
    const core = load('index.cjs') as typeof import('../src/index.js');
    const entries = new Map<string, import('../src/index.js').CacheEntry>();
    const cache = {
      name: 'no-sab',
      get: (key: string) => entries.get(key),
      set: (key: string, entry: import('../src/index.js').CacheEntry) => {
        entries.set(key, entry);
      },
      delete: (key: string) => {
        entries.delete(key);
      },
    };
    expect(await core.getOrCompute(cache, 'k', 60_000, () => 'filled')).toBe('filled');
    expect(await core.getOrCompute(cache, 'k', 60_000, () => 'again')).toBe('filled');
  });

  it('has no runtime dependencies', () => {
    const manifest = JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8'));
    expect(manifest.dependencies ?? {}).toEqual({});
  });
});
