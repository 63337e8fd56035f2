import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configKeyTable } from '../../src/commands/config-key-table.js';

/** The key table of docs/configuration.md is the one the schema generates: it cannot drift from it. */
describe('the key table of docs/configuration.md', () => {
  it('is the table generated from the config schema (gateway config-schema --markdown)', async () => {
    const page = readFileSync('docs/configuration.md', 'utf8');
    const start = page.indexOf('<!-- config-keys:start -->');
    const end = page.indexOf('<!-- config-keys:end -->');
    expect(start).toBeGreaterThan(-1);
    const shown = page
      .slice(start, end)
      .split('\n')
      .filter((line) => line.startsWith('|'));
    // Prettier aligns the columns of the page: cells are compared without the padding.
    const cells = (line: string) =>
      line
        .split(/(?<!\\)\|/)
        .map((cell) => cell.trim().replace(/^-+$/, '---'))
        .join('|');
    expect(shown.map(cells)).toEqual(configKeyTable().split('\n').map(cells));
  });

  it('names each type of a key once, however many variants of the schema the key is in', () => {
    const row = (key: string) =>
      configKeyTable()
        .split('\n')
        .find((line) => line.startsWith(`| \`${key}\` |`));
    expect(row('workers')).toBe('| `workers` | "auto" \\| integer 1–1024 | `1` |');
    expect(row('admin.users[].role')).toBe('| `admin.users[].role` | "admin" \\| "member" |  |');
  });
});
