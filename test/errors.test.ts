import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dataPlaneErrors, errorBody } from '../src/errors.js';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? sourceFiles(file) : file.endsWith('.ts') ? [file] : [];
  });
}

describe('the data-plane error table', () => {
  const readme = readFileSync('README.md', 'utf8');
  const sources = sourceFiles('src')
    .filter((file) => file !== path.join('src', 'errors.ts'))
    .map((file) => readFileSync(file, 'utf8'))
    .join('\n');

  it.each(Object.entries(dataPlaneErrors))(
    'documents %s in the README with its status',
    (code, { status }) => {
      expect(readme).toMatch(new RegExp(`\\|\\s*${status}\\s*\\|\\s*\`com\\.vendor\\.api\\.${code}\``));
    },
  );

  it.each(Object.keys(dataPlaneErrors))('uses %s somewhere in the gateway', (code) => {
    expect(sources).toContain(`'${code}'`);
  });

  it('builds the seed body exactly', () => {
    expect(errorBody('unauthorized')).toBe(
      '{"id":"com.vendor.api.unauthorized","message":"Unauthorized","success":false}',
    );
  });
});
