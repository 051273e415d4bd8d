import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packages = fileURLToPath(new URL('../..', import.meta.url));

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** The app processes and the soak import the BUILT packages: build any whose dist is missing or stale. */
export default function setup(): void {
  for (const name of ['core', 'redis']) {
    const root = join(packages, name);
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
