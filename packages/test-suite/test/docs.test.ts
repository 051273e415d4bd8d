import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');

// docs/adapters.md shows the example adapter and its test; these are the files that run, so the
// guide cannot drift from code that passes the suite.
describe('docs/adapters.md', () => {
  const guide = read('../../../docs/adapters.md');
  it.each(['map-cache.ts', 'map-cache.test.ts'])('shows test/%s exactly as it runs', (file) => {
    expect(guide).toContain(`\`\`\`ts\n${read(`./${file}`)}\`\`\``);
  });
});
