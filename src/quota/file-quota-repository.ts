import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../observe/log.js';
import { wellKnownQuotas, type QuotaRecord, type StoredQuota } from './model.js';
import { readFileIfPresent, writeFileDurably, WriteQueue } from './durable-file.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  QuotaStoreCorrupt,
  QuotaWriteFailed,
  isStoredResets,
  raisedResets,
  resetGenerationsOf,
  type QuotaRepository,
  type QuotaWrite,
  type StoredResets,
} from './quota-repository.js';
import { notAPlan, planRuleBroken } from './plans.js';
import { QuotaSnapshot } from './quota-snapshot.js';
import { claimStoreFile } from './store-owner.js';
import { parseRecord, replacing, serializeRecord, stored } from './stored-records.js';

const formatVersion = 1;

/** @throws QuotaConflict when the write breaks a rule of plans (see plans.ts). */
function keepPlanRules(records: ReadonlyMap<string, QuotaRecord>, id: string, next: QuotaRecord | undefined) {
  const broken = planRuleBroken(records, id, next);
  if (broken) throw new QuotaConflict(broken);
}

/** @throws QuotaConflict when the application of `record` has a quota in `records` already. */
function refuseSecondQuota(records: ReadonlyMap<string, QuotaRecord>, record: QuotaRecord) {
  if (
    record.application &&
    [...records.values()].some((existing) => existing.application === record.application)
  )
    throw new QuotaConflict(`application '${record.application}' already has a quota`);
}

/**
 * `store.type: "memory"`: definitions in this process, persisted to one JSON file. Writes are
 * serialized, and each is on disk (temp file, fsync, rename, fsync of the folder) before it resolves;
 * a failed write leaves both the file and the definitions in memory as they were.
 */
export class FileQuotaRepository extends QuotaSnapshot implements QuotaRepository {
  private readonly writes = new WriteQueue();
  /** The reset generations as the file holds them (see `QuotaRepository.resets`). */
  private storedResets: StoredResets = {};

  /** Unmarks the file as the running gateway's, when this repository marked it. */
  private release: (() => void) | null = null;

  constructor(
    private readonly file: string,
    private readonly logger: Logger,
    /** This repository is the running gateway's: it marks the file so (see store-owner.ts). */
    private readonly owned = false,
  ) {
    super();
  }

  async open(): Promise<void> {
    const text = await readFileIfPresent(this.file).catch((error: NodeJS.ErrnoException) => {
      throw new QuotaStoreCorrupt(`${this.file}: cannot read (${error.code ?? error.message})`);
    });
    const { records, resets } = text === null ? { records: [], resets: {} } : this.parse(text);
    const missing = wellKnownQuotas().filter(
      (known) => !records.some((record) => record.quota.id === known.quota.id),
    );
    const all = [...missing, ...records];
    if (text === null || missing.length > 0) {
      await mkdir(path.dirname(this.file), { recursive: true });
      await writeFileDurably(this.file, this.serialize(all, resets));
    }
    this.records = new Map(all.map((record) => [record.quota.id, stored(record)]));
    this.storedResets = resets;
    this.resetGenerations = resetGenerationsOf(resets);
    this.logger.info({ file: this.file, quotas: this.records.size }, 'quota definitions loaded');
    if (this.owned) this.release = claimStoreFile(this.file);
  }

  create(record: QuotaRecord): Promise<StoredQuota> {
    return this.write((records) => {
      refuseSecondQuota(records, record);
      keepPlanRules(records, record.quota.id, record);
      const created = stored(record);
      records.set(record.quota.id, created);
      return created;
    });
  }

  replace(record: QuotaRecord, ifMatch?: string): Promise<StoredQuota> {
    return this.write((records) => {
      const current = this.current(records, record.quota.id, ifMatch);
      const replaced = stored(replacing(record, current.application));
      keepPlanRules(records, record.quota.id, replaced);
      records.set(record.quota.id, replaced);
      return replaced;
    });
  }

  remove(id: string, ifMatch?: string): Promise<void> {
    return this.write((records) => {
      this.current(records, id, ifMatch);
      keepPlanRules(records, id, undefined);
      records.delete(id);
    });
  }

  writeAll(writes: readonly QuotaWrite[]): Promise<void> {
    return this.write((records) => {
      for (const { record, etag } of writes) {
        const id = record.quota.id;
        const current = records.get(id);
        if (etag === undefined ? current !== undefined : current?.etag !== etag)
          throw new QuotaPreconditionFailed(id);
        if (current === undefined) refuseSecondQuota(records, record);
        records.set(id, stored(current === undefined ? record : replacing(record, current.application)));
      }
      for (const { record } of writes) keepPlanRules(records, record.quota.id, records.get(record.quota.id));
    });
  }

  reset(application: string, keyBases: readonly string[]): Promise<void> {
    return this.writes.run(async () => {
      const next = raisedResets(this.storedResets, application, keyBases);
      await this.persist([...this.records.values()], next);
      this.storedResets = next;
      this.publish(new Map(this.records), resetGenerationsOf(next));
    });
  }

  async close(): Promise<void> {
    await this.writes.drained();
    this.release?.();
  }

  private current(records: Map<string, StoredQuota>, id: string, ifMatch: string | undefined): StoredQuota {
    const current = records.get(id);
    if (!current) throw new QuotaNotFound(id);
    if (ifMatch !== undefined && ifMatch !== current.etag) throw new QuotaPreconditionFailed(id);
    return current;
  }

  /** Applies `change` to a copy, persists the copy, and only then makes it the current set. */
  private write<T>(change: (records: Map<string, StoredQuota>) => T): Promise<T> {
    const run = async () => {
      const next = new Map(this.records);
      const result = change(next);
      await this.persist([...next.values()], this.storedResets);
      this.publish(next);
      return result;
    };
    return this.writes.run(run);
  }

  /** Writes the file; on a failure nothing is changed, in the file or in memory. */
  private async persist(records: QuotaRecord[], resets: StoredResets): Promise<void> {
    try {
      await writeFileDurably(this.file, this.serialize(records, resets));
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException;
      this.logger.error({ err: { code, message }, file: this.file }, 'writing quota definitions failed');
      throw new QuotaWriteFailed(`cannot write quota definitions (${code ?? message}); nothing was changed`);
    }
  }

  /** The file's text; `resets` only when there are some, so a file without resets reads as before. */
  private serialize(records: QuotaRecord[], resets: StoredResets): string {
    const body = records.map((record) => `    ${serializeRecord(record)}`).join(',\n');
    const resetsField = Object.keys(resets).length === 0 ? '' : `,\n  "resets": ${JSON.stringify(resets)}`;
    return `{\n  "version": ${formatVersion},\n  "quotas": [\n${body}\n  ]${resetsField}\n}\n`;
  }

  /**
   * The records of the file, read through the quota schema. A file that is not JSON of the expected form,
   * or that holds any record the schema refuses, is refused whole, naming every bad record and problem.
   */
  private parse(text: string): { records: QuotaRecord[]; resets: StoredResets } {
    const refuse = (problems: string) =>
      new QuotaStoreCorrupt(
        `${this.file}: not a quota file: ${problems} (nothing was changed; fix or remove these records, or restore the file from a backup)`,
      );
    let document: { version?: unknown; quotas?: unknown; resets?: unknown };
    try {
      document = JSON.parse(text) as typeof document;
    } catch (error) {
      throw refuse((error as Error).message);
    }
    if (
      typeof document !== 'object' ||
      document === null ||
      document.version !== formatVersion ||
      !Array.isArray(document.quotas)
    ) {
      throw refuse(`expected {"version": ${formatVersion}, "quotas": [...]}`);
    }
    const resets = document.resets ?? {};
    if (!isStoredResets(resets)) {
      throw refuse('resets: must map applications to counters to whole numbers of at least 1');
    }
    const records: QuotaRecord[] = [];
    const problems: string[] = [];
    const seen = new Set<string>();
    (document.quotas as unknown[]).forEach((value, i) => {
      const id = typeof value === 'object' && value !== null ? (value as { id?: unknown }).id : undefined;
      const label = typeof id === 'string' ? `quotas[${i}] (id '${id}')` : `quotas[${i}]`;
      const parsed = parseRecord(value);
      if ('problems' in parsed) {
        problems.push(...parsed.problems.map((problem) => `${label}: ${problem}`));
        return;
      }
      const { quota, application } = parsed.record;
      if (seen.has(quota.id)) problems.push(`${label}: id: appears twice in the file`);
      else if (application !== undefined && records.some((record) => record.application === application)) {
        problems.push(`${label}: application: '${application}' already has a quota earlier in the file`);
      }
      seen.add(quota.id);
      records.push(parsed.record);
    });
    const byId = new Map(records.map((record) => [record.quota.id, record]));
    records.forEach((record, i) => {
      const problem = record.plan === undefined ? undefined : notAPlan(record.plan, byId.get(record.plan));
      if (problem) problems.push(`quotas[${i}] (id '${record.quota.id}'): plan: ${problem}`);
    });
    if (problems.length > 0) throw refuse(problems.join('; '));
    return { records, resets };
  }
}
