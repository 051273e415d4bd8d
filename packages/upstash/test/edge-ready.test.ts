import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '..', 'src');

describe('edge readiness', () => {
  it('imports no node: module and no Node-only global in its sources', () => {
    for (const file of readdirSync(src)) {
      const text = readFileSync(join(src, file), 'utf8');
      expect(text, file).not.toMatch(/from ['"]node:/);
      expect(text, file).not.toMatch(/\b(Buffer|process|require)\b[.(]/);
      expect(text, file).not.toMatch(/from ['"](crypto|fs|path|http|net|os|buffer)['"]/);
    }
  });
});
