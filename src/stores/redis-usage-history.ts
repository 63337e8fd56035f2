import {
  byLine,
  countNames,
  dateOfDayNumber,
  dayNumberOf,
  emptyRowOf,
  lineFieldOf,
  type UsageHistoryStore,
  type UsageQuery,
  type UsageRow,
} from '../quota/usage-history.js';
import type { RedisConnection } from '../redis/connect-redis.js';

/** The one letter of each count in a hash field: `<line field>\t<letter>`. */
const letters: Record<(typeof countNames)[number], string> = {
  admitted: 'a',
  refused: 'r',
  bytesIn: 'i',
  bytesOut: 'o',
  units: 'u',
};
const namesOfLetters = new Map(countNames.map((name) => [letters[name], name]));

/**
 * The hash of a day's history in the Redis store of `prefix`. Every day has the hash tag `{usage}`, so
 * that a flush's pipeline, which may write two days, and a reader's, which reads many, each go to one
 * node of a Redis Cluster (a prefix with its own tag keeps them together too).
 */
export const usageHistoryKeyOf = (prefix: string, date: string): string => `${prefix}usage:{usage}:${date}`;

/**
 * `store.type: "redis"`: a hash per day, a field per count of a line (`<application>\t<api>\t<method>\t<a|r|i|o|u>`),
 * added to with HINCRBY by every gateway of the fleet, so that their flushes sum into one line. A day's
 * hash expires `days` days after its last write (which is on that day, or in the second after it).
 */
export class RedisUsageHistory implements UsageHistoryStore {
  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
    private readonly days: number,
  ) {}

  /** One pipeline: the additions of every line, and the expiry of each day written. */
  async add(rows: readonly UsageRow[]): Promise<void> {
    const pipeline = this.redis.pipeline();
    const keys = new Set<string>();
    for (const row of rows) {
      const key = usageHistoryKeyOf(this.prefix, row.date);
      keys.add(key);
      const field = lineFieldOf(row);
      for (const name of countNames)
        if (row[name] !== 0) pipeline.hincrby(key, `${field}\t${letters[name]}`, row[name]);
    }
    for (const key of keys) pipeline.expire(key, (this.days + 1) * 86_400);
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([error]) => error);
    if (failed) throw failed[0]!;
  }

  async read(query: UsageQuery): Promise<UsageRow[]> {
    const dates: string[] = [];
    for (let day = dayNumberOf(query.from); day <= dayNumberOf(query.to); day += 1)
      dates.push(dateOfDayNumber(day));
    const pipeline = this.redis.pipeline();
    for (const date of dates) pipeline.hgetall(usageHistoryKeyOf(this.prefix, date));
    const results = (await pipeline.exec()) ?? [];
    const rows: UsageRow[] = [];
    results.forEach(([error, hash], index) => {
      if (error) throw error;
      const lines = new Map<string, UsageRow>();
      for (const [field, value] of Object.entries(hash as Record<string, string>)) {
        const cut = field.lastIndexOf('\t');
        const name = namesOfLetters.get(field.slice(cut + 1));
        if (name === undefined) continue;
        const line = field.slice(0, cut);
        let row = lines.get(line);
        if (row === undefined) lines.set(line, (row = emptyRowOf(dates[index]!, line)));
        row[name] = Number(value);
      }
      for (const row of lines.values()) {
        if (query.application !== undefined && row.application !== query.application) continue;
        if (query.api !== undefined && row.api !== query.api) continue;
        rows.push(row);
      }
    });
    return rows.sort(byLine);
  }

  /** The connection is the store's: its owner closes it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
