// Installs @stampede/core + @stampede/memory from packed tarballs into a throwaway project and
// proves that (1) the adapters' heavy peers are not installed and (2) both `import` and `require`
// work, of the main entry and of the adapter subpath `@stampede/core/adapter` (which shares the
// main entry's counters, and whose names the main entry does not export). Run after the packages
// are built. Then installs @stampede/core + @stampede/redis (+ @stampede/redis-protocol, its
// dependency) with ioredis, their peer, and proves that neither `redis` (node-redis) nor
// `@upstash/redis` comes along: a binding carries only its own client.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const work = mkdtempSync(join(tmpdir(), 'stampede-install-'));
const run = (cmd, args, cwd) =>
  execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });

/** Packs `pkgs` (directories under packages/) into `dir` and returns the tarballs' paths. */
function pack(pkgs, dir) {
  return pkgs.map((pkg) => {
    const out = run('pnpm', ['pack', '--pack-destination', dir], join(root, 'packages', pkg));
    // `stampede-redis-<version>` but not `stampede-redis-protocol-<version>`.
    const file = readdirSync(dir).find((f) => new RegExp(`^stampede-${pkg}-\\d.*\\.tgz$`).test(f));
    if (file === undefined) throw new Error(`pnpm pack produced no tarball for ${pkg}:\n${out}`);
    return join(dir, file);
  });
}

/** Installs `specs` into a fresh project `name` under the work directory; returns its path. */
function install(name, specs) {
  const app = join(work, name);
  run('mkdir', ['-p', app], work);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name, private: true, version: '1.0.0' }));
  console.log(`${name}: installing`, specs.map((t) => t.split('/').pop()).join(', '));
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...specs], app);
  return app;
}

/** Throws when any of `forbidden` was installed into `app`. */
function assertAbsent(app, forbidden) {
  const present = forbidden.filter((name) => existsSync(join(app, 'node_modules', name)));
  if (present.length > 0) throw new Error(`installed but must not be: ${present.join(', ')}`);
  console.log(`not installed (as required): ${forbidden.join(', ')}`);
}

/** Throws unless every `@stampede/<name>` installed into `app` carries its LICENSE. */
function assertLicenses(app, names) {
  for (const name of names) {
    if (!existsSync(join(app, 'node_modules', '@stampede', name, 'LICENSE')))
      throw new Error(`the @stampede/${name} tarball has no LICENSE`);
  }
  console.log(`every tarball carries its LICENSE (${names.join(', ')})`);
}

try {
  const tarballs = pack(['core', 'memory'], work);
  const app = install('install-check', tarballs);
  assertAbsent(app, ['ioredis', 'redis', '@upstash/redis', 'prom-client']);
  assertLicenses(app, ['core', 'memory']);

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
    if ('raceTimeout' in main || 'encodeEnvelope' in main || typeof kit.raceTimeout !== 'function')
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

  // core + the ioredis binding: the protocol package comes along, no other Redis client does.
  const redisDir = join(work, 'redis-tarballs');
  run('mkdir', ['-p', redisDir], work);
  const redisTarballs = pack(['core', 'redis-protocol', 'redis'], redisDir);
  const redisApp = install('install-check-redis', [...redisTarballs, 'ioredis@^5']);
  assertAbsent(redisApp, ['redis', '@upstash/redis', 'prom-client']);
  assertLicenses(redisApp, ['core', 'redis-protocol', 'redis']);
  const redisProgram = `
    if (typeof binding.createRedisCache !== 'function' || typeof protocol.remoteKeys !== 'function')
      throw new Error('@stampede/redis or @stampede/redis-protocol does not load');
    if (protocol.remoteKeys('p:', 'k').value !== binding.redisKeys('p:', 'k').value)
      throw new Error('@stampede/redis does not use the protocol layout');
    if ('WRITE_GUARD_LUA' in kit) throw new Error('@stampede/core/adapter still carries the Redis layout');
    console.log(MODE + ': @stampede/redis and @stampede/redis-protocol load; core/adapter has no Redis layout');
  `;
  writeFileSync(
    join(redisApp, 'esm.mjs'),
    `import * as binding from '@stampede/redis';\nimport * as protocol from '@stampede/redis-protocol';\nimport * as kit from '@stampede/core/adapter';\nconst MODE = 'import';\n${redisProgram}`,
  );
  writeFileSync(
    join(redisApp, 'cjs.cjs'),
    `const binding = require('@stampede/redis');\nconst protocol = require('@stampede/redis-protocol');\nconst kit = require('@stampede/core/adapter');\nconst MODE = 'require';\n${redisProgram}`,
  );
  process.stdout.write(run('node', ['esm.mjs'], redisApp));
  process.stdout.write(run('node', ['cjs.cjs'], redisApp));
  console.log('install check passed');
} finally {
  rmSync(work, { recursive: true, force: true });
}
