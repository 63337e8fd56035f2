import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StoredApplication } from '../../src/applications/application-schema.js';
import {
  planApplications,
  writeQuotasThenApplications,
} from '../../src/applications/application-transfer.js';
import { FileApplicationRepository } from '../../src/applications/file-application-repository.js';
import { createLogger } from '../../src/observe/log.js';
import { FileQuotaRepository } from '../../src/quota/file-quota-repository.js';
import { sampleQuota } from '../helpers/quota-repository-contract.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

const logger = createLogger({ level: 'silent' });
const temp = useTempDirs('quotagate-transfer-');

const application = (name: string, key: string = randomUUID()): StoredApplication => ({
  id: randomUUID(),
  name,
  description: '',
  enabled: true,
  createdOn: 1_800_000_000_000,
  keys: [
    {
      id: randomUUID(),
      digest: createHash('sha256').update(key).digest('hex'),
      environment: 'development',
      enabled: true,
      createdOn: 1_800_000_000_000,
    },
  ],
});

async function openStores() {
  const dir = temp.make();
  const quotas = new FileQuotaRepository(path.join(dir, 'quotas.json'), logger);
  const applications = new FileApplicationRepository(path.join(dir, 'applications.json'), logger);
  await quotas.open();
  await applications.open();
  return { quotas, applications, applicationsFile: path.join(dir, 'applications.json') };
}

describe('writing an import', () => {
  it('writes the quotas, then the applications; when the applications fail, says the quotas were written and to import again', async () => {
    const stores = await openStores();
    const quota = sampleQuota();
    const made = application('Partner');
    // A folder where the temporary file must go makes the write fail, as a full or read-only disk would.
    const blocker = `${stores.applicationsFile}.${process.pid}.tmp`;
    mkdirSync(blocker);
    await expect(
      writeQuotasThenApplications(
        stores,
        [{ record: { quota } }],
        [{ application: made, previous: undefined }],
      ),
    ).rejects.toThrow(
      /^the quotas were written, the applications were not \(cannot write the applications .*\): import the same file again to write them$/,
    );
    expect(stores.quotas.get(quota.id)).toBeDefined();
    expect(stores.applications.get(made.id)).toBeUndefined();
    rmSync(blocker, { recursive: true });

    const again = planApplications(stores.applications.all(), [made], [], 'applications');
    await writeQuotasThenApplications(stores, [], again.writes);
    expect(JSON.parse(readFileSync(stores.applicationsFile, 'utf8')).applications).toEqual([made]);
  });

  it('writes nothing when the store refuses the quotas', async () => {
    const stores = await openStores();
    const taken = await stores.quotas.create({ quota: sampleQuota() });
    const made = application('Partner');
    await expect(
      writeQuotasThenApplications(
        stores,
        [{ record: { quota: sampleQuota() } }, { record: { quota: taken.quota } }],
        [{ application: made, previous: undefined }],
      ),
    ).rejects.toThrow(/^the store did not take the quotas \(.*\): nothing was written$/);
    expect(stores.quotas.all()).toHaveLength(3);
    expect(stores.applications.all()).toEqual([]);
  });
});

describe('planning the applications of an import', () => {
  it('creates, replaces and leaves alone, and refuses an id twice, an id of conf/, and a key another application has', () => {
    const [kept, changed, fresh] = [application('Kept'), application('Changed'), application('Fresh')];
    const sharedKey = 'one-key-for-two';
    const holder = application('Holder', sharedKey);
    const plan = planApplications(
      [kept, changed, holder],
      [kept, { ...changed, enabled: false }, fresh],
      [],
      'applications',
    );
    expect(plan.problems).toEqual([]);
    expect(plan.changes.map(({ action, name }) => [action, name])).toEqual([
      ['unchanged', 'Kept'],
      ['replace', 'Changed'],
      ['create', 'Fresh'],
    ]);
    expect(plan.writes.map(({ application: written, previous }) => [written.name, previous?.name])).toEqual([
      ['Changed', 'Changed'],
      ['Fresh', undefined],
    ]);

    const thief = application('Thief', sharedKey);
    const refused = planApplications(
      [holder],
      [fresh, fresh, kept, thief],
      [{ id: kept.id.toUpperCase() }],
      'applications',
    );
    expect(refused.problems).toEqual([
      { path: [1, 'id'], message: 'duplicate of applications[0].id' },
      {
        path: [2, 'id'],
        message: 'the application applications[0] of conf/ has this id; give one of them another',
      },
      {
        path: [3, 'keys', 0, 'digest'],
        message: `the same key as one of application '${holder.id}': a key opens requests as one application`,
      },
    ]);
  });
});
