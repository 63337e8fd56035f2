import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../observe/log.js';
import { defaultsVersion, type DefinitionSet } from './definition-set.js';
import { writeFileDurably } from './durable-file.js';

const format = 1;

/**
 * `store.snapshotFile`: the last definitions a gateway of the Redis store saw, kept on its own disk so
 * that it can enforce them when it starts while Redis is down, and put them back into a Redis that lost
 * them. The file names the store it belongs to (prefix and Redis addresses, never credentials): a
 * snapshot of another store is ignored. Nothing here is fatal: a snapshot that cannot be read or written
 * is logged, and the gateway goes on without it.
 */
export class DefinitionsSnapshot {
  /** The text the file holds as far as this process knows, so that an unchanged set is not written. */
  private saved: string | null = null;

  constructor(
    readonly file: string,
    private readonly store: string,
    private readonly logger: Logger,
  ) {}

  /** The set of the file; null when there is none, or when it cannot be used (logged). */
  async read(): Promise<DefinitionSet | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException;
      if (code !== 'ENOENT') {
        this.logger.warn(
          { err: { code, message }, file: this.file },
          'cannot read the quota snapshot; ignored',
        );
      }
      return null;
    }
    const parsed = this.parse(text);
    if (typeof parsed === 'string') {
      this.logger.warn({ file: this.file, problem: parsed }, 'the quota snapshot is unusable; ignored');
      return null;
    }
    this.saved = this.serialize(parsed);
    return parsed;
  }

  /** Writes `set` unless the file already holds it; a failure is logged, never thrown. */
  async save(set: DefinitionSet): Promise<void> {
    const text = this.serialize(set);
    if (text === this.saved) return;
    try {
      await mkdir(path.dirname(this.file), { recursive: true });
      await writeFileDurably(this.file, text);
      this.saved = text;
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException;
      this.logger.warn(
        { err: { code, message }, file: this.file },
        'cannot write the quota snapshot; a start while redis is down will not have these definitions',
      );
    }
  }

  /** One text per set: keys sorted, so that equal sets give equal texts. */
  private serialize(set: DefinitionSet): string {
    const sorted = (record: Record<string, string>) =>
      Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const document = {
      format,
      store: this.store,
      version: set.version,
      definitions: sorted(set.definitions),
      applications: sorted(set.applications),
    };
    return `${JSON.stringify(document, null, 2)}\n`;
  }

  /** The set of a snapshot's text, or what is wrong with it. */
  private parse(text: string): DefinitionSet | string {
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch {
      return 'not JSON';
    }
    if (typeof document !== 'object' || document === null) return 'not a JSON object';
    const { format: given, store, version, definitions, applications } = document as Record<string, unknown>;
    if (given !== format) return `format: must be ${format}`;
    if (store !== this.store) return `store: belongs to ${JSON.stringify(store)}, not to ${this.store}`;
    if (!Number.isSafeInteger(version) || (version as number) < defaultsVersion) {
      return `version: must be an integer of at least ${defaultsVersion}`;
    }
    if (!isTextRecord(definitions) || Object.keys(definitions).length === 0) {
      return 'definitions: must map quota ids to stored texts, at least one';
    }
    if (!isTextRecord(applications)) return 'applications: must map applications to quota ids';
    return { version: version as number, definitions, applications };
  }
}

function isTextRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((entry) => typeof entry === 'string')
  );
}
