import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** The replica processes import the built package: build it when dist is missing or older than src. */
export default function setup(): void {
  let built = 0;
  try {
    built = statSync(join(root, 'dist', 'index.js')).mtimeMs;
  } catch {
    // Not built yet.
  }
  if (built < newest(join(root, 'src'))) {
    execFileSync('pnpm', ['exec', 'tsup'], { cwd: root, stdio: 'inherit' });
  }
}
