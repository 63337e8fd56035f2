import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileUsageHistory } from '../../src/quota/file-usage-history.js';
import type { UsageRow } from '../../src/quota/usage-history.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/** The memory store's history file: read back after a restart, days beyond those kept dropped. */
const dirs = useTempDirs('quotagate-history-file-');

const row = (date: string, admitted: number): UsageRow => ({
  date,
  application: 'web',
  api: 'pets',
  method: null,
  admitted,
  refused: 0,
  bytesIn: 0,
  bytesOut: 0,
  units: 0,
});

describe('FileUsageHistory', () => {
  it('keeps its lines across a restart, and the days kept up to the newest', async () => {
    const file = path.join(dirs.make(), 'usage-history.json');
    const history = new FileUsageHistory(file, 3);
    await history.open();
    await history.add([row('2026-11-27', 1), row('2026-11-28', 2)]);
    await history.add([row('2026-11-28', 3), row('2026-11-30', 4)]);
    await history.close();

    const reopened = new FileUsageHistory(file, 3);
    await reopened.open();
    // 2026-11-27 is more than 3 days before 2026-11-30.
    expect(await reopened.read({ from: '2026-11-01', to: '2026-11-30' })).toEqual([
      row('2026-11-28', 5),
      row('2026-11-30', 4),
    ]);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      days: {
        '2026-11-28': { 'web\tpets\t': [5, 0, 0, 0, 0] },
        '2026-11-30': { 'web\tpets\t': [4, 0, 0, 0, 0] },
      },
    });
  });

  it('refuses a file that is not a history, naming it', async () => {
    const file = path.join(dirs.make(), 'usage-history.json');
    writeFileSync(file, '[1, 2]');
    await expect(new FileUsageHistory(file, 3).open()).rejects.toThrow(`${file}: not a usage history file`);
  });
});
