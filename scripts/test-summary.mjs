// Sums vitest's "Tests  N passed | M failed (T)" lines in a test run's log and prints one plain
// closing line, "Tests: N passed, M failed", so a reader (or CI) sees the whole run's count at once.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (file === undefined) {
  console.error('usage: node scripts/test-summary.mjs <log file>');
  process.exit(2);
}
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes are what we strip
const text = readFileSync(file, 'utf8').replace(/\u001b\[[0-9;]*m/g, '');
let passed = 0;
let failed = 0;
let suites = 0;
for (const line of text.split('\n')) {
  const match = /\bTests\s+(.*)\(\d+\)\s*$/.exec(line);
  if (match === null) continue;
  suites++;
  passed += Number(/(\d+) passed/.exec(match[1])?.[1] ?? 0);
  failed += Number(/(\d+) failed/.exec(match[1])?.[1] ?? 0);
}
console.log(`\n${suites} vitest runs`);
console.log(`Tests: ${passed} passed, ${failed} failed`);
