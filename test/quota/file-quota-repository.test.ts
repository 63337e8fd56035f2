import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observe/log.js';
import { FileQuotaRepository } from '../../src/quota/file-quota-repository.js';
import { QuotaStoreCorrupt, QuotaWriteFailed } from '../../src/quota/quota-repository.js';
import { describeQuotaRepositoryContract, sampleQuota } from '../helpers/quota-repository-contract.js';

const logger = createLogger({ level: 'silent' });
const dirs: string[] = [];
const freshFile = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-store-'));
  dirs.push(dir);
  return path.join(dir, 'nested', 'quotas.json');
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describeQuotaRepositoryContract('file', async () => {
  const file = freshFile();
  const repository = new FileQuotaRepository(file, logger);
  await repository.open();
  return {
    repository,
    reopen: async () => {
      const next = new FileQuotaRepository(file, logger);
      await next.open();
      return next;
    },
    close: () => repository.close(),
  };
});

describe('FileQuotaRepository', () => {
  it('refuses a corrupt file at open and leaves it untouched', async () => {
    const file = freshFile();
    mkdirSync(path.dirname(file), { recursive: true });
    for (const text of [
      '{"version": 1, "quotas": [',
      '{"quotas": []}',
      '{"version":1,"quotas":[{"id":"x"}]}',
      '',
    ]) {
      writeFileSync(file, text);
      const failure = await new FileQuotaRepository(file, logger).open().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(QuotaStoreCorrupt);
      expect((failure as Error).message).toContain(`${file}: not a quota file:`);
      expect(readFileSync(file, 'utf8')).toBe(text);
    }
  });

  it('refuses to open a file holding records the quota schema refuses, naming each record and every problem', async () => {
    const file = freshFile();
    mkdirSync(path.dirname(file), { recursive: true });
    const restriction = (config: Record<string, string>, type = 'throttlemb') => ({
      api: '*',
      method: '*',
      type,
      config,
    });
    const good = sampleQuota();
    const tiny = sampleQuota({
      restrictions: [restriction({ mb: '1e-7', per: '1', period: 'day' }) as never],
    });
    const huge = sampleQuota({
      restrictions: [
        restriction({ mb: '953674317', per: '1', period: 'day' }) as never,
        restriction({ messages: '0', per: '1', period: 'second' }, 'throttle') as never,
      ],
    });
    const owned = { ...sampleQuota(), application: 'mobile' };
    const first = { ...sampleQuota({ type: 'APPLICATION' }), application: 'web' };
    const second = { ...sampleQuota({ type: 'APPLICATION' }), application: 'web' };
    const quotas = [good, tiny, huge, owned, { ...good }, first, second];
    const text = `${JSON.stringify({ version: 1, quotas }, null, 2)}\n`;
    writeFileSync(file, text);
    const failure = await new FileQuotaRepository(file, logger).open().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(QuotaStoreCorrupt);
    const mb = 'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals';
    expect((failure as Error).message).toBe(
      `${file}: not a quota file: ` +
        [
          `quotas[1] (id '${tiny.id}'): restrictions[0].config.mb: ${mb}`,
          `quotas[2] (id '${huge.id}'): restrictions[0].config.mb: ${mb}`,
          `quotas[2] (id '${huge.id}'): restrictions[1].config.messages: must be a whole number from 1 to 1000000000000`,
          `quotas[3] (id '${owned.id}'): application: only a quota of type APPLICATION that is not a well-known quota can belong to an application`,
          `quotas[4] (id '${good.id}'): id: appears twice in the file`,
          `quotas[6] (id '${second.id}'): application: 'web' already has a quota earlier in the file`,
        ].join('; ') +
        ' (nothing was changed; fix or remove these records, or restore the file from a backup)',
    );
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('answers a failed write with QuotaWriteFailed and changes neither file nor memory', async () => {
    const file = freshFile();
    const repository = new FileQuotaRepository(file, logger);
    await repository.open();
    const kept = sampleQuota();
    await repository.create({ quota: kept });
    const before = readFileSync(file, 'utf8');
    // A folder where the temporary file must go makes the write fail, as a full or read-only disk would.
    mkdirSync(`${file}.${process.pid}.tmp`);
    await expect(repository.create({ quota: sampleQuota() })).rejects.toBeInstanceOf(QuotaWriteFailed);
    await expect(repository.replace({ quota: { ...kept, name: 'not saved' } })).rejects.toBeInstanceOf(
      QuotaWriteFailed,
    );
    await expect(repository.remove(kept.id)).rejects.toBeInstanceOf(QuotaWriteFailed);
    await expect(
      repository.writeAll([
        { record: { quota: sampleQuota() } },
        { record: { quota: { ...kept, name: 'not saved' } }, etag: repository.get(kept.id)!.etag },
      ]),
    ).rejects.toBeInstanceOf(QuotaWriteFailed);
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(repository.all()).toHaveLength(3);
    expect(repository.get(kept.id)?.quota.name).toBe(kept.name);
    rmSync(`${file}.${process.pid}.tmp`, { recursive: true });
    await repository.replace({ quota: { ...kept, name: 'saved' } });
    expect(JSON.parse(readFileSync(file, 'utf8')).quotas[2].name).toBe('saved');
  });

  it('serializes concurrent writes: none is lost', async () => {
    const file = freshFile();
    const repository = new FileQuotaRepository(file, logger);
    await repository.open();
    const quotas = Array.from({ length: 20 }, () => sampleQuota());
    await Promise.all(quotas.map((quota) => repository.create({ quota })));
    const next = new FileQuotaRepository(file, logger);
    await next.open();
    expect(next.all()).toHaveLength(22);
  });
});
