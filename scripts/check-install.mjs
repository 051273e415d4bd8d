// Installs @stampede/core + @stampede/memory from packed tarballs into a throwaway project and
// proves that (1) the adapters' heavy peers are not installed and (2) both `import` and `require`
// work, of the main entry and of the adapter subpath `@stampede/core/adapter` (which shares the
// main entry's counters, and whose names the main entry does not export). Run after the packages
// are built.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const work = mkdtempSync(join(tmpdir(), 'stampede-install-'));
const run = (cmd, args, cwd) =>
  execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });

try {
  const tarballs = [];
  for (const pkg of ['core', 'memory']) {
    const out = run('pnpm', ['pack', '--pack-destination', work], join(root, 'packages', pkg));
    const file = readdirSync(work).find((f) => f.startsWith(`stampede-${pkg}-`) && f.endsWith('.tgz'));
    if (file === undefined) throw new Error(`pnpm pack produced no tarball for ${pkg}:\n${out}`);
    tarballs.push(join(work, file));
  }
  const app = join(work, 'app');
  run('mkdir', ['-p', app], work);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'install-check', private: true, version: '1.0.0' }),
  );
  console.log('installing from tarballs:', tarballs.map((t) => t.split('/').pop()).join(', '));
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], app);

  const forbidden = ['ioredis', '@upstash/redis', 'prom-client'];
  const present = forbidden.filter((name) => existsSync(join(app, 'node_modules', name)));
  if (present.length > 0) throw new Error(`installed but must not be: ${present.join(', ')}`);
  console.log(`not installed (as required): ${forbidden.join(', ')}`);
  for (const name of ['core', 'memory']) {
    if (!existsSync(join(app, 'node_modules', '@stampede', name, 'LICENSE')))
      throw new Error(`the @stampede/${name} tarball has no LICENSE`);
  }
  console.log('every tarball carries its LICENSE');

  const program = `
    const cache = createMemoryCache({ max: 10 });
    let fills = 0;
    const values = await Promise.all(Array.from({ length: 100 }, () => getOrCompute(cache, 'k', '1m', async () => ++fills)));
    if (fills !== 1 || values.some((v) => v !== 1)) throw new Error('coalescing failed: ' + fills);
    console.log(MODE + ': 100 callers, ' + fills + ' fill');
    const entry = { value: 'v', createdAt: 2, freshUntil: 3, staleUntil: 4 };
    const back = kit.decodeEnvelope(kit.encodeEnvelope(entry));
    if (back.value !== 'v' || !kit.shouldReplace(undefined, entry) || kit.shouldReplace(entry, { ...entry, createdAt: 1 }))
      throw new Error('@stampede/core/adapter does not work');
    if ('WRITE_GUARD_LUA' in main || 'encodeEnvelope' in main || typeof kit.WRITE_GUARD_LUA !== 'string')
      throw new Error('the adapter kit leaks into @stampede/core, or is missing from @stampede/core/adapter');
    const before = main.stats().backendErrors;
    kit.reportBackendError('install-check', 'get', 'k', new Error('x'));
    if (main.stats().backendErrors !== before + 1) throw new Error('@stampede/core/adapter has counters of its own');
    console.log(MODE + ': @stampede/core/adapter resolves, shares the counters, stays out of the main entry');
  `;
  writeFileSync(
    join(app, 'esm.mjs'),
    `import * as main from '@stampede/core';\nimport * as kit from '@stampede/core/adapter';\nimport { createMemoryCache } from '@stampede/memory';\nconst { getOrCompute } = main;\nconst MODE = 'import';\n${program}`,
  );
  writeFileSync(
    join(app, 'cjs.cjs'),
    `const main = require('@stampede/core');\nconst kit = require('@stampede/core/adapter');\nconst { getOrCompute } = main;\nconst { createMemoryCache } = require('@stampede/memory');\nconst MODE = 'require';\n(async () => {${program}})().catch((e) => { console.error(e); process.exit(1); });`,
  );
  process.stdout.write(run('node', ['esm.mjs'], app));
  process.stdout.write(run('node', ['cjs.cjs'], app));
  console.log('install check passed');
} finally {
  rmSync(work, { recursive: true, force: true });
}
