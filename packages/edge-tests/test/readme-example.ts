import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';

const here = import.meta.dirname;
/** The repository's root. */
export const repoRoot = resolve(here, '../../..');
const fixtures = join(here, 'fixtures');

/**
 * The first ```ts block after the line `marker` in a Markdown file of the repository (a heading such
 * as `## Usage`, or a paragraph line such as `Cloudflare Workers:`): the example exactly as a reader
 * copies it. Throws when the marker or the block is missing, so a README edit that drops an example
 * fails the test that runs it.
 */
export function readmeBlock(file: string, marker: string): string {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n');
  const at = lines.findIndex((line) => line.trim() === marker.trim());
  if (at === -1) throw new Error(`${file}: no line '${marker}'`);
  const open = lines.findIndex((line, index) => index > at && /^```(ts|typescript)\s*$/.test(line));
  if (open === -1) throw new Error(`${file}: no \`\`\`ts block after '${marker}'`);
  const close = lines.findIndex((line, index) => index > open && line.startsWith('```'));
  if (close === -1) throw new Error(`${file}: the block after '${marker}' is not closed`);
  return lines.slice(open + 1, close).join('\n');
}

/** What the fixtures read at run time, baked into the bundle (esbuild `define`). */
export interface ExampleConfig {
  /** The test database server's URL (`db-server.ts`): the fixture's `fetchTopPosts` calls it. */
  dbUrl: string;
  /** The key prefix every `createUpstashCache` of the example gets unless it names one. */
  prefix: string;
}

/** Where the bundle runs: workerd (ESM module worker) or Vercel's edge-runtime (a classic script). */
export type ExampleTarget = 'workerd' | 'edge-runtime';

/**
 * Redirects what the example imports to the test's fixtures, as a bundler alias would:
 * `./db.js` to `fixtures/db.ts` (the reader's data layer: a real `fetch` to the test's database),
 * `@stampede/upstash` to a wrapper that only adds this run's key prefix (the shared test Redis must
 * not see the README's default prefix).
 */
function fixturesPlugin(): Plugin {
  const prefixed = join(fixtures, 'upstash-with-prefix.ts');
  return {
    name: 'readme-example-fixtures',
    setup(b) {
      b.onResolve({ filter: /^\.\/db\.js$/ }, () => ({ path: join(fixtures, 'db.ts') }));
      b.onResolve({ filter: /^@stampede\/upstash$/ }, (args) =>
        args.importer === prefixed ? undefined : { path: prefixed },
      );
    },
  };
}

/**
 * Bundles a README example with esbuild the way a user deploys it: ESM for the browser platform
 * with the `workerd`/`worker`/`browser` conditions, `cloudflare:workers` left to the runtime. For
 * edge-runtime (which evaluates scripts, not modules) it is an IIFE whose exports land on
 * `globalThis.example`. Returns the bundle's text.
 */
export async function bundleExample(
  source: string,
  target: ExampleTarget,
  config: ExampleConfig,
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'stampede-edge-example-'));
  try {
    const entry = join(dir, 'example.ts');
    writeFileSync(entry, source);
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      write: false,
      format: target === 'workerd' ? 'esm' : 'iife',
      ...(target === 'edge-runtime' ? { globalName: 'example' } : {}),
      platform: 'browser',
      target: 'es2022',
      conditions:
        target === 'workerd' ? ['workerd', 'worker', 'browser'] : ['edge-light', 'worker', 'browser'],
      external: target === 'workerd' ? ['cloudflare:workers'] : [],
      // The temporary directory has no node_modules: resolve packages as this package does.
      nodePaths: [join(here, '..', 'node_modules')],
      define: { __EDGE_TEST__: JSON.stringify(config) },
      plugins: [fixturesPlugin()],
      logLevel: 'silent',
    });
    const text = result.outputFiles[0]?.text;
    if (text === undefined) throw new Error('esbuild produced no bundle');
    return text;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The `node:` modules a bundle imports or requires (none may be reachable on an edge runtime). */
export function nodeBuiltinsIn(bundle: string): string[] {
  return [...bundle.matchAll(/(?:from\s*|import\s*\(\s*|require\s*\(\s*)["'](node:[^"']+)["']/g)].map(
    (match) => match[1] ?? '',
  );
}
