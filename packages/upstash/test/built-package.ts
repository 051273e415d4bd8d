import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');

/**
 * The built entry point (`dist/index.js`) that child processes and the edge worker load. Throws a
 * clear error when it is missing or older than the sources: build first.
 */
export function builtEntry(): string {
  const entry = join(root, 'dist', 'index.js');
  const hint = 'run `pnpm --filter @stampede/upstash build` first (these tests load the built package)';
  if (!existsSync(entry)) throw new Error(`${entry} does not exist: ${hint}`);
  const built = statSync(entry).mtimeMs;
  for (const file of readdirSync(join(root, 'src'))) {
    if (statSync(join(root, 'src', file)).mtimeMs > built) {
      throw new Error(`dist is older than src/${file}: ${hint}`);
    }
  }
  return entry;
}
