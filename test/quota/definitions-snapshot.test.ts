import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { wellKnownSet, type DefinitionSet } from '../../src/quota/definition-set.js';
import { DefinitionsSnapshot } from '../../src/quota/definitions-snapshot.js';
import { capturingLogger } from '../helpers/log-capture.js';

const root = mkdtempSync(path.join(tmpdir(), 'quotagate-snapshot-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let files = 0;
const freshFile = () => {
  files += 1;
  return path.join(root, String(files), 'quota-snapshot.json');
};

const store = 'quotagate: on 127.0.0.1:6379/0';
const setAt = (version: number): DefinitionSet => ({
  ...wellKnownSet(),
  version,
  applications: { 'cn=mobile,ou=apps': 'some-id' },
});

describe('DefinitionsSnapshot', () => {
  it('reads back the set it wrote, in a folder it creates', async () => {
    const file = freshFile();
    await new DefinitionsSnapshot(file, store, capturingLogger().logger).save(setAt(4));
    expect(await new DefinitionsSnapshot(file, store, capturingLogger().logger).read()).toEqual(setAt(4));
  });

  it('writes only when the set changed', async () => {
    const file = freshFile();
    const snapshot = new DefinitionsSnapshot(file, store, capturingLogger().logger);
    await snapshot.save(setAt(1));
    rmSync(file);
    await snapshot.save(setAt(1));
    expect(existsSync(file)).toBe(false);
    await snapshot.save(setAt(2));
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ format: 1, store, version: 2 });
  });

  it('does not write again a set it read from the file', async () => {
    const file = freshFile();
    await new DefinitionsSnapshot(file, store, capturingLogger().logger).save(setAt(3));
    const reader = new DefinitionsSnapshot(file, store, capturingLogger().logger);
    await reader.read();
    rmSync(file);
    await reader.save(setAt(3));
    expect(existsSync(file)).toBe(false);
  });

  it.each([
    ['not JSON', '{"format": 1,', 'not JSON'],
    ['of another store', JSON.stringify({ ...setAt(1), format: 1, store: 'other: on h:1/0' }), 'store: '],
    ['of an unknown format', JSON.stringify({ ...setAt(1), format: 2, store }), 'format: must be 1'],
    [
      'without definitions',
      JSON.stringify({ ...setAt(1), definitions: {}, format: 1, store }),
      'definitions',
    ],
    ['with a broken version', JSON.stringify({ ...setAt(1), version: '7', format: 1, store }), 'version'],
  ])('ignores a snapshot %s, and logs why', async (_case, text, problem) => {
    const file = freshFile();
    mkdirSync(path.dirname(file));
    writeFileSync(file, text);
    const { lines, logger } = capturingLogger();
    expect(await new DefinitionsSnapshot(file, store, logger).read()).toBeNull();
    const warning = lines.find((line) => line.msg === 'the quota snapshot is unusable; ignored');
    expect(warning).toMatchObject({ file, level: 40 });
    expect(String(warning?.problem)).toContain(problem);
  });

  it('says nothing when there is no snapshot yet', async () => {
    const { lines, logger } = capturingLogger();
    expect(await new DefinitionsSnapshot(freshFile(), store, logger).read()).toBeNull();
    expect(lines).toEqual([]);
  });

  it('logs a write that fails instead of throwing, and tries again at the next save', async () => {
    const file = freshFile();
    mkdirSync(file, { recursive: true });
    const { lines, logger } = capturingLogger();
    const snapshot = new DefinitionsSnapshot(file, store, logger);
    await snapshot.save(setAt(1));
    expect(lines.map((line) => line.msg)).toEqual([
      'cannot write the quota snapshot; a start while redis is down will not have these definitions',
    ]);
    rmSync(file, { recursive: true });
    await snapshot.save(setAt(1));
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1 });
  });
});
