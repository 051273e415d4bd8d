// Writes every ```ts / ```typescript block of the repository's Markdown (READMEs, docs/) to
// snippets/<file>-<n>.ts, so that `tsc` checks each one exactly as a reader would paste it: strict
// settings, its own imports, nothing added. A block that is deliberately a fragment is fenced as
// ```ts fragment and skipped (the count of skipped blocks is printed). A block written for Cloudflare
// Workers (it imports `cloudflare:workers` or `@upstash/redis/cloudflare`) goes to snippets/workers/,
// checked against the Workers runtime's types instead of Node's and the DOM's.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const out = join(here, 'snippets');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\n')
  .filter((file) => file !== '' && !file.startsWith('.changeset/') && !file.includes('CHANGELOG'));

let written = 0;
let fragments = 0;
for (const file of files) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  let block;
  let index = 0;
  for (const line of lines) {
    if (block === undefined) {
      const open = /^```(ts|typescript)(\s+fragment)?\s*$/.exec(line);
      if (open !== null) block = { fragment: open[2] !== undefined, lines: [] };
      continue;
    }
    if (line.startsWith('```')) {
      index++;
      if (block.fragment) fragments++;
      else {
        const name = `${relative(root, join(root, file)).replace(/[^A-Za-z0-9]+/g, '-')}-${index}.ts`;
        // Each snippet is its own module, so top-level await and repeated names are fine.
        const body = block.lines.join('\n');
        const dir = /from '(cloudflare:workers|@upstash\/redis\/cloudflare)'/.test(body)
          ? join(out, 'workers')
          : out;
        mkdirSync(dir, { recursive: true });
        writeFileSync(
          join(dir, name),
          `${body}\n${/^\s*(import|export)\s/m.test(body) ? '' : 'export {};\n'}`,
        );
        written++;
      }
      block = undefined;
      continue;
    }
    block.lines.push(line);
  }
}
// The reader's own modules the snippets import (`./db.js`, and `./map-cache.js`: the example adapter
// of docs/adapters.md, whose page shows this very file).
for (const dir of [out, join(out, 'workers')]) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'db.ts'), readFileSync(join(here, 'db.ts'), 'utf8'));
  writeFileSync(
    join(dir, 'map-cache.ts'),
    readFileSync(join(root, 'packages/test-suite/test/map-cache.ts'), 'utf8'),
  );
}
console.log(`docs-snippets: ${written} TypeScript blocks to check, ${fragments} fenced as fragments`);
