import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SOAK = fileURLToPath(new URL('../src/soak.mjs', import.meta.url));

describe('soak machinery (short: 5 s, 2 processes)', () => {
  it('runs the mixed workload, prints its figures, and every invariant holds', async () => {
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      execFile(
        process.execPath,
        [SOAK],
        { env: { ...process.env, SOAK_SECONDS: '5', SOAK_PROCESSES: '2' }, timeout: 90_000 },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
          resolve({ code, output: `${stdout}${stderr}` });
        },
      );
    });
    console.log(output);
    expect(code).toBe(0);
    expect(output).toMatch(/\| proc \| +ops \|/);
    expect(output).toContain('soak: OK');
  });
});
