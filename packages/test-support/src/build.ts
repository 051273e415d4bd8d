import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/**
 * Builds (tsup) each package whose `dist` is missing or older than its `src`. For test suites whose
 * child processes import a package's BUILT output, when vitest runs without turbo's build first.
 */
export function buildIfStale(packageRoots: readonly string[]): void {
  for (const root of packageRoots) {
    let built = 0;
    try {
      built = statSync(join(root, 'dist', 'index.js')).mtimeMs;
    } catch {
      // Not built yet.
    }
    if (built < newest(join(root, 'src')))
      execFileSync('pnpm', ['exec', 'tsup'], { cwd: root, stdio: 'inherit' });
  }
}
