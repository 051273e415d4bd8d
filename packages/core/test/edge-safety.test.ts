import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '..', 'src');

describe('@stampede/core runs on edge runtimes', () => {
  it('imports nothing from node: and no Node globals (process, Buffer, require)', () => {
    const files = readdirSync(src).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const text = readFileSync(join(src, file), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/\/\/.*$/gm, '');
      expect(text, file).not.toMatch(/from ['"]node:/);
      expect(text, file).not.toMatch(/\bimport\(['"]node:/);
      expect(text, file).not.toMatch(/\b(process|Buffer|require|__dirname)\s*[.(]/);
    }
  });

  it('has no runtime dependencies', () => {
    const manifest = JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8'));
    expect(manifest.dependencies ?? {}).toEqual({});
  });
});
