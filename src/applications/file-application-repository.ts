import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import type { Logger } from '../observe/log.js';
import { readFileIfPresent, writeFileDurably, WriteQueue } from '../quota/durable-file.js';
import {
  ApplicationChanged,
  ApplicationNotFound,
  ApplicationStoreUnavailable,
  type ApplicationRepository,
  type ApplicationWrite,
} from './application-repository.js';
import { storedApplicationSchema, type StoredApplication } from './application-schema.js';
import { ApplicationSet } from './application-set.js';

const formatVersion = 1;
const fileSchema = z.strictObject({
  version: z.literal(formatVersion),
  applications: z.array(storedApplicationSchema),
});

/** The file cannot be read as applications; it is left as it is. */
export class ApplicationStoreCorrupt extends Error {}

/**
 * `store.type: "memory"`: the applications in this process, persisted to one JSON file
 * (`store.applicationsFile`). Writes are serialized, and each is on disk before it resolves; a failed
 * write leaves the file and the applications in memory as they were.
 */
export class FileApplicationRepository extends ApplicationSet implements ApplicationRepository {
  private readonly writes = new WriteQueue();

  constructor(
    private readonly file: string,
    private readonly logger: Logger,
  ) {
    super();
  }

  async open(): Promise<void> {
    const text = await readFileIfPresent(this.file).catch((error: NodeJS.ErrnoException) => {
      throw new ApplicationStoreCorrupt(`${this.file}: cannot read (${error.code ?? error.message})`);
    });
    if (text === null) return;
    let parsed;
    try {
      parsed = fileSchema.safeParse(JSON.parse(text));
    } catch (error) {
      throw new ApplicationStoreCorrupt(`${this.file}: not JSON (${(error as Error).message})`);
    }
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
      throw new ApplicationStoreCorrupt(`${this.file}: not an applications file: ${problems.join('; ')}`);
    }
    this.publish(new Map(parsed.data.applications.map((application) => [application.id, application])));
    this.logger.info({ file: this.file, applications: this.applications.size }, 'applications loaded');
  }

  create(application: StoredApplication): Promise<StoredApplication> {
    return this.write((all) => {
      all.set(application.id, application);
      return application;
    });
  }

  update(id: string, change: (current: StoredApplication) => StoredApplication): Promise<StoredApplication> {
    return this.write((all) => {
      const current = all.get(id);
      if (!current) throw new ApplicationNotFound(id);
      const next = change(current);
      all.set(id, next);
      return next;
    });
  }

  remove(id: string): Promise<void> {
    return this.write((all) => {
      if (!all.delete(id)) throw new ApplicationNotFound(id);
    });
  }

  writeAll(writes: readonly ApplicationWrite[]): Promise<void> {
    return this.write((all) => {
      for (const { application, previous } of writes) {
        if (!isDeepStrictEqual(all.get(application.id), previous))
          throw new ApplicationChanged(application.id);
        all.set(application.id, application);
      }
    });
  }

  async close(): Promise<void> {
    await this.writes.drained();
  }

  /** Applies `change` to a copy, writes the copy, and only then makes it the set held. */
  private write<T>(change: (all: Map<string, StoredApplication>) => T): Promise<T> {
    return this.writes.run(async () => {
      const next = new Map(this.applications);
      const result = change(next);
      const applications = [...next.values()];
      try {
        await mkdir(path.dirname(this.file), { recursive: true });
        await writeFileDurably(
          this.file,
          `${JSON.stringify({ version: formatVersion, applications }, null, 2)}\n`,
        );
      } catch (error) {
        const { code, message } = error as NodeJS.ErrnoException;
        this.logger.error({ err: { code, message }, file: this.file }, 'writing applications failed');
        throw new ApplicationStoreUnavailable(
          `cannot write the applications (${code ?? message}); nothing was changed`,
        );
      }
      this.publish(next);
      return result;
    });
  }
}
