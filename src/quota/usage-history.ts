/**
 * Usage history (docs/quotas.md, "Usage history"): what each application called, per API, method and
 * day. The data path adds to a book in memory (`UsageBook`, a few Map lookups and additions, no
 * allocation once a line exists); once a second its lines go to the store in one write
 * (`UsageHistoryFlush`), so that history costs no store trip per request.
 */

/** What one line counts. */
export interface UsageCounts {
  /** Requests the quota check admitted, forwarded upstream. */
  admitted: number;
  /** Requests the quota check refused (429). */
  refused: number;
  bytesIn: number;
  bytesOut: number;
  /** Units the answers said (the largest a `throttleunits` restriction was charged, per request). */
  units: number;
}

/** One line of history: an application (null for a public API's callers), an API, a method, a day. */
export interface UsageRow extends UsageCounts {
  /** The day, `YYYY-MM-DD`, in the calendar of `usageHistory.timeZone`. */
  date: string;
  application: string | null;
  /** The catalog's id of the API. */
  api: string;
  /** The catalog's id of the method, or null when the request matched none of the API's methods. */
  method: string | null;
}

/** What a reader of the history asks: the days from `from` to `to` (both included), narrowed. */
export interface UsageQuery {
  from: string;
  to: string;
  application?: string;
  api?: string;
}

/** Where history is kept: the memory store's file, or Redis hashes. */
export interface UsageHistoryStore {
  /** Adds the counts of `rows` to the lines of the same day, application, API and method. */
  add(rows: readonly UsageRow[]): Promise<void>;
  /** The lines of `query`, by date, then application, API and method. */
  read(query: UsageQuery): Promise<UsageRow[]>;
  close(): Promise<void>;
}

export const countNames = ['admitted', 'refused', 'bytesIn', 'bytesOut', 'units'] as const;

/** The field of a line in a store: application, API and method, null ones empty, split by tabs. */
export const lineFieldOf = (row: Pick<UsageRow, 'application' | 'api' | 'method'>): string =>
  `${row.application ?? ''}\t${row.api}\t${row.method ?? ''}`;

/** The line a field of `lineFieldOf` names, on `date`, with nothing counted yet. */
export function emptyRowOf(date: string, field: string): UsageRow {
  const [application = '', api = '', method = ''] = field.split('\t');
  return {
    date,
    application: application || null,
    api,
    method: method || null,
    admitted: 0,
    refused: 0,
    bytesIn: 0,
    bytesOut: 0,
    units: 0,
  };
}

/** Adds the counts of `from` to `into`. */
export function addCounts(into: UsageCounts, from: UsageCounts): void {
  for (const name of countNames) into[name] += from[name];
}

const isEmpty = (counts: UsageCounts): boolean => countNames.every((name) => counts[name] === 0);

const dayMs = 86_400_000;

/** A `YYYY-MM-DD` date as a count of days since 1970-01-01 (calendar arithmetic, any time zone). */
export const dayNumberOf = (date: string): number =>
  Date.UTC(Number(date.slice(0, 4)), Number(date.slice(5, 7)) - 1, Number(date.slice(8, 10))) / dayMs;

/** The `YYYY-MM-DD` date of a day number of `dayNumberOf`. */
export const dateOfDayNumber = (day: number): string => new Date(day * dayMs).toISOString().slice(0, 10);

/** Whether `text` is a day of the calendar written `YYYY-MM-DD`. */
export const isDate = (text: string): boolean =>
  /^\d{4}-\d{2}-\d{2}$/.test(text) && dateOfDayNumber(dayNumberOf(text)) === text;

/**
 * What is wrong with a range of days asked of the history, one sentence per mistake (none when right):
 * each a date, `from` no later than `to`, and no more days than `days` keeps.
 */
export function rangeProblems(from: string, to: string, days: number): string[] {
  const problems = [
    ...(isDate(from) ? [] : [`from: '${from}' is not a date as YYYY-MM-DD`]),
    ...(isDate(to) ? [] : [`to: '${to}' is not a date as YYYY-MM-DD`]),
  ];
  if (problems.length > 0) return problems;
  const span = dayNumberOf(to) - dayNumberOf(from) + 1;
  if (span < 1) return [`from: ${from} is later than to (${to})`];
  if (span > days) return [`to: ${span} days asked, but the history keeps ${days} (usageHistory.days)`];
  return [];
}

/** Lines in the order readers get them: by date, application (null first), API, method. */
export function byLine(a: UsageRow, b: UsageRow): number {
  return (
    a.date.localeCompare(b.date) ||
    (a.application ?? '').localeCompare(b.application ?? '') ||
    a.api.localeCompare(b.api) ||
    (a.method ?? '').localeCompare(b.method ?? '')
  );
}

/**
 * The days of a calendar: which one an instant is in, and when it ends. A day of a time zone with
 * daylight saving is 23 or 25 hours long, so its end is searched for, once a day, not added.
 */
export class UsageCalendar {
  private readonly format: Intl.DateTimeFormat;

  /** @throws RangeError when `timeZone` is not one Intl knows (the config checks it first). */
  constructor(readonly timeZone: string) {
    // en-CA writes dates as YYYY-MM-DD.
    this.format = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
  }

  dayOf(ms: number): string {
    return this.format.format(ms);
  }

  /** The first millisecond after `ms` that is in another day: at most 26 hours on (a zone's shift). */
  endOfDay(ms: number): number {
    const day = this.dayOf(ms);
    let inside = ms;
    let after = ms + 26 * 3_600_000;
    while (after - inside > 1) {
      const middle = Math.floor((inside + after) / 2);
      if (this.dayOf(middle) === day) inside = middle;
      else after = middle;
    }
    return after;
  }
}

/** Whether `timeZone` is an IANA time zone this runtime knows. */
export function knownTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone });
    return true;
  } catch {
    return false;
  }
}

/** A line of the book: counted since the last flush. */
export type UsageEntry = UsageCounts;

type Lines = Map<string, Map<string, Map<string, UsageEntry>>>;

/**
 * The counts of the current day since the last flush, by application, API and method (null ones keyed
 * ''), each line kept from one flush to the next while it counts, so that a request on a line that
 * exists allocates nothing; and the lines of a day that ended before they were flushed.
 */
export class UsageBook {
  private lines: Lines = new Map();
  private day = '';
  private dayEndsAt = Number.NEGATIVE_INFINITY;
  /**
   * Lines taken from the book and not yet in the store (a day that ended, a write that failed), one per
   * day, application, API and method: while a store is down, what waits for it grows with the lines
   * counted, not with the seconds it is down.
   */
  private held = new Map<string, UsageRow>();

  constructor(
    private readonly calendar: UsageCalendar,
    private readonly now: () => number,
  ) {}

  /** The line of application, API and method today, made on its first request. */
  line(application: string | null, api: string, method: string | null): UsageEntry {
    if (this.now() >= this.dayEndsAt) this.turnDay();
    const app = application ?? '';
    let apis = this.lines.get(app);
    if (apis === undefined) this.lines.set(app, (apis = new Map()));
    let methods = apis.get(api);
    if (methods === undefined) apis.set(api, (methods = new Map()));
    const key = method ?? '';
    let entry = methods.get(key);
    if (entry === undefined) {
      entry = { admitted: 0, refused: 0, bytesIn: 0, bytesOut: 0, units: 0 };
      methods.set(key, entry);
    }
    return entry;
  }

  /**
   * The lines counted since the last take, and those held back: each line is zeroed, and one that
   * counted nothing since the last take is dropped.
   */
  take(): UsageRow[] {
    const rows = this.held;
    this.held = new Map();
    this.collect(rows, true);
    return [...rows.values()];
  }

  /** Lines a store could not take: they go with the next take, added to the same lines counted since. */
  giveBack(rows: readonly UsageRow[]): void {
    for (const row of rows) hold(this.held, row);
  }

  private turnDay(): void {
    // Counts of the day that ended are that day's: held until the next flush.
    this.collect(this.held, false);
    this.lines = new Map();
    const now = this.now();
    this.day = this.calendar.dayOf(now);
    this.dayEndsAt = this.calendar.endOfDay(now);
  }

  private collect(rows: Map<string, UsageRow>, keep: boolean): void {
    for (const [application, apis] of this.lines) {
      for (const [api, methods] of apis) {
        for (const [method, entry] of methods) {
          if (isEmpty(entry)) {
            methods.delete(method);
            continue;
          }
          const row: UsageRow = {
            date: this.day,
            application: application || null,
            api,
            method: method || null,
            ...entry,
          };
          hold(rows, row);
          if (keep) for (const name of countNames) entry[name] = 0;
        }
        if (methods.size === 0) apis.delete(api);
      }
      if (apis.size === 0) this.lines.delete(application);
    }
  }
}

/** Adds `row` to the line of its day, application, API and method in `rows`, or makes that line. */
function hold(rows: Map<string, UsageRow>, row: UsageRow): void {
  const key = `${row.date}\t${row.application ?? ''}\t${row.api}\t${row.method ?? ''}`;
  const known = rows.get(key);
  if (known === undefined) rows.set(key, { ...row });
  else addCounts(known, row);
}

/** What the flush is given: the book, the store's write, timers, and where a failed write is said. */
export interface UsageFlushParts {
  book: UsageBook;
  write: (rows: readonly UsageRow[]) => Promise<void>;
  timers: { setTimeout(callback: () => void, ms: number): unknown; clearTimeout(timer: unknown): void };
  onError: (error: unknown, rows: number) => void;
}

/** Milliseconds between two writes of the book to the store: what a gateway that dies may lose. */
export const usageFlushMs = 1_000;

/**
 * Writes the book to the store once a second, one write at a time; a failed write's lines go with
 * the next. `close` writes what is left, so that a graceful stop loses nothing.
 */
export class UsageHistoryFlush {
  private timer: unknown = null;
  private writing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly parts: UsageFlushParts) {
    this.schedule();
  }

  /** Writes what the book holds now; resolves once it is written (or given back). */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      const rows = this.parts.book.take();
      if (rows.length === 0) return;
      try {
        await this.parts.write(rows);
      } catch (error) {
        this.parts.onError(error, rows.length);
        if (!this.closed) this.parts.book.giveBack(rows);
      }
    });
    return this.writing;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) this.parts.timers.clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  private schedule(): void {
    this.timer = this.parts.timers.setTimeout(() => {
      void this.flush().then(() => {
        if (!this.closed) this.schedule();
      });
    }, usageFlushMs);
  }
}
