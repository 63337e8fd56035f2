import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { adminErrorStatuses, errorsBody } from '../../src/admin/admin-errors.js';
import { dataPlaneErrors, errorBody } from '../../src/gateway/answers/errors.js';

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? sourceFiles(file) : file.endsWith('.ts') ? [file] : [];
  });
}

describe('the data-plane error table', () => {
  const readme = readFileSync('docs/routing-and-proxy.md', 'utf8');
  const sources = sourceFiles('src')
    .filter((file) => file !== path.join('src', 'gateway', 'errors.ts'))
    .map((file) => readFileSync(file, 'utf8'))
    .join('\n');

  it.each(Object.entries(dataPlaneErrors))(
    'documents %s in docs/routing-and-proxy.md with its status',
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

describe('the admin API error table', () => {
  const page = readFileSync('docs/admin-api.md', 'utf8');
  const section = page.slice(page.indexOf('## Portal Quota API'));

  it.each(Object.keys(adminErrorStatuses))(
    'documents status %s in the Quota API section of docs/admin-api.md',
    (status) => {
      expect(section).toMatch(new RegExp(`\\n\\|\\s*${status}\\s*\\|`));
    },
  );

  it('builds the documented body', () => {
    expect(errorsBody(404, ["no quota with id 'x'"])).toEqual({
      errors: [{ code: 404, message: "no quota with id 'x'" }],
    });
    expect(errorsBody(401)).toEqual({ errors: [{ code: 401, message: 'Unauthorized' }] });
  });
});
