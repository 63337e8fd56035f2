import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { readFileIfPresent, writeFileDurably, WriteQueue } from './durable-file.js';
import {
  addCounts,
  byLine,
  dayNumberOf,
  emptyRowOf,
  lineFieldOf,
  type UsageCounts,
  type UsageHistoryStore,
  type UsageQuery,
  type UsageRow,
} from './usage-history.js';

/** The history file of a memory store whose quotas are in `quotasFile`: beside it. */
export const usageHistoryFileOf = (quotasFile: string): string =>
  path.join(path.dirname(quotasFile), 'usage-history.json');

/** The file's form: per day, per line field (`lineFieldOf`), the five counts in `countNames` order. */
interface HistoryFile {
  days: Record<string, Record<string, [number, number, number, number, number]>>;
}

/**
 * `store.type: "memory"`: history in this process, kept in one JSON file written durably (as the quota
 * definitions are) after each flush that added to it, so that a restart keeps it. Days older than
 * `days` before the newest are dropped as they pass.
 */
export class FileUsageHistory implements UsageHistoryStore {
  private readonly lines = new Map<string, Map<string, UsageCounts>>();
  private readonly writes = new WriteQueue();

  constructor(
    private readonly file: string,
    private readonly days: number,
  ) {}

  /** @throws Error naming the file when it holds no history of this form. */
  async open(): Promise<void> {
    const text = await readFileIfPresent(this.file);
    if (text === null) return;
    let parsed: HistoryFile;
    try {
      parsed = JSON.parse(text) as HistoryFile;
      if (typeof parsed?.days !== 'object' || parsed.days === null) throw new Error('no "days"');
    } catch (error) {
      throw new Error(`${this.file}: not a usage history file (${(error as Error).message})`);
    }
    for (const [date, fields] of Object.entries(parsed.days)) {
      const day = new Map<string, UsageCounts>();
      for (const [field, [admitted, refused, bytesIn, bytesOut, units]] of Object.entries(fields))
        day.set(field, { admitted, refused, bytesIn, bytesOut, units });
      this.lines.set(date, day);
    }
  }

  add(rows: readonly UsageRow[]): Promise<void> {
    for (const row of rows) {
      let day = this.lines.get(row.date);
      if (day === undefined) this.lines.set(row.date, (day = new Map()));
      const field = lineFieldOf(row);
      const counts = day.get(field) ?? { admitted: 0, refused: 0, bytesIn: 0, bytesOut: 0, units: 0 };
      addCounts(counts, row);
      day.set(field, counts);
    }
    this.dropOldDays();
    const text = this.serialize();
    return this.writes.run(async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      await writeFileDurably(this.file, text);
    });
  }

  read(query: UsageQuery): Promise<UsageRow[]> {
    const rows: UsageRow[] = [];
    for (const [date, day] of this.lines) {
      if (date < query.from || date > query.to) continue;
      for (const [field, counts] of day) {
        const row = emptyRowOf(date, field);
        if (query.application !== undefined && row.application !== query.application) continue;
        if (query.api !== undefined && row.api !== query.api) continue;
        addCounts(row, counts);
        rows.push(row);
      }
    }
    return Promise.resolve(rows.sort(byLine));
  }

  close(): Promise<void> {
    return this.writes.drained();
  }

  /** Keeps the `days` days up to the newest one, as Redis keeps a day's hash `days` days. */
  private dropOldDays(): void {
    const dates = [...this.lines.keys()];
    const newest = Math.max(...dates.map(dayNumberOf));
    for (const date of dates) if (dayNumberOf(date) <= newest - this.days) this.lines.delete(date);
  }

  private serialize(): string {
    const days: HistoryFile['days'] = {};
    for (const date of [...this.lines.keys()].sort()) {
      const fields: HistoryFile['days'][string] = {};
      for (const [field, c] of this.lines.get(date)!)
        fields[field] = [c.admitted, c.refused, c.bytesIn, c.bytesOut, c.units];
      days[date] = fields;
    }
    return `${JSON.stringify({ days } satisfies HistoryFile)}\n`;
  }
}
