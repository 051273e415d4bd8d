import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { MUTANTS } from './mutants/mutants.js';

// The suite's own regression test: every broken adapter in mutants/mutants.ts fails it (each was
// once a copy of an adapter that passed), and the correct one passes. Each runs in a vitest process
// of its own, as a third party's test file would.
const run = promisify(execFile);
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const vitest = join(packageDir, 'node_modules', '.bin', 'vitest');
const out = mkdtempSync(join(tmpdir(), 'stampede-mutants-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Report {
  numPassedTests: number;
  numFailedTests: number;
  testResults: { assertionResults: { status: string; fullName: string }[] }[];
}

async function suiteOn(mutant: string): Promise<Report> {
  const file = join(out, `${mutant.replace(/\W+/g, '-')}.json`);
  const args = [
    'run',
    '--config',
    'test/mutants/vitest.config.ts',
    '--reporter=json',
    `--outputFile=${file}`,
  ];
  // A failing suite exits with 1: the report says what failed.
  await run(vitest, args, { cwd: packageDir, env: { ...process.env, STAMPEDE_MUTANT: mutant } }).catch(
    () => {},
  );
  return JSON.parse(readFileSync(file, 'utf8')) as Report;
}

describe('the suite against broken adapters', () => {
  it('passes the correct cache', { timeout: 60_000 }, async () => {
    const report = await suiteOn('none');
    expect(report.numFailedTests).toBe(0);
    expect(report.numPassedTests).toBeGreaterThan(50);
  });

  it.each(Object.keys(MUTANTS).filter((name) => name !== 'none'))(
    'fails the broken adapter: %s',
    { timeout: 60_000 },
    async (mutant) => {
      const report = await suiteOn(mutant);
      expect(report.numFailedTests, `the suite passed the mutant '${mutant}'`).toBeGreaterThan(0);
    },
  );
});
