import { isDeepStrictEqual } from 'node:util';
import type { Logger } from '../observe/log.js';
import { WriteQueue } from '../quota/durable-file.js';
import { ReloadLoop } from '../quota/reload-loop.js';
import { duplicateConnection, firstConnection, type RedisConnection } from '../redis/connect-redis.js';
import { readLuaScript } from '../redis/lua-script.js';
import {
  ApplicationChanged,
  ApplicationNotFound,
  ApplicationStoreUnavailable,
  type ApplicationRepository,
  type ApplicationWrite,
} from '../applications/application-repository.js';
import { storedApplicationSchema, type StoredApplication } from '../applications/application-schema.js';
import { ApplicationSet } from '../applications/application-set.js';

/**
 * Writes one application if it is still as it was read (`''`: absent), removes it when the new text is
 * empty, and tells every gateway. One key: it runs on Redis Cluster as it is.
 */
const compareAndSet = `
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if current ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 1`;

const casAttempts = 10;

/** The hash of the applications made through the portal API in the Redis store of `prefix`. */
export const applicationsKeyOf = (prefix: string) => `${prefix}applications`;

interface ApplicationScripts {
  applicationsWriteAll(key: string, channel: string, ...triples: string[]): Promise<0 | 1>;
}

/**
 * `store.type: "redis"`: the applications in one Redis hash under the store's prefix (id → JSON), shared
 * by the fleet. Each write is a compare-and-set of one application that publishes the change; every
 * gateway subscribes and loads the whole hash again, so a change is in force everywhere within a
 * second. A gateway that starts while Redis is down holds no application of the API until it answers
 * (their keys are refused meanwhile: closed, not open).
 */
export class RedisApplicationRepository extends ApplicationSet implements ApplicationRepository {
  private readonly key: string;
  private readonly channel: string;
  private readonly reloads: ReloadLoop;
  private subscriber: RedisConnection | null = null;
  /** This process's writes, one at a time: only other gateways' writes can make a compare-and-set miss. */
  private readonly writes = new WriteQueue();
  private readonly reloadSoon = () => this.reloads.request();

  constructor(
    private readonly redis: RedisConnection,
    prefix: string,
    private readonly logger: Logger,
  ) {
    super();
    this.key = applicationsKeyOf(prefix);
    redis.defineCommand('applicationsWriteAll', {
      numberOfKeys: 1,
      lua: readLuaScript(import.meta.url, 'applications-write-all'),
    });
    this.channel = `${prefix}applications:changed`;
    this.reloads = new ReloadLoop(() => this.load(), {
      onFailure: (error, failures, retryInMs) => {
        if (failures > 1) return;
        this.logger.warn(
          { err: { message: error.message }, retryInMs },
          'cannot load the applications from redis; retrying until it answers',
        );
      },
      onRecovery: (failures) =>
        this.logger.info({ failedAttempts: failures }, 'applications loaded from redis again'),
    });
  }

  async open(): Promise<void> {
    const subscriber = duplicateConnection(this.redis);
    this.subscriber = subscriber;
    subscriber.on('message', this.reloadSoon);
    // A (re)connected subscriber may have missed changes: load the whole set again.
    subscriber.on('ready', () => {
      subscriber.subscribe(this.channel).then(this.reloadSoon, this.reloadSoon);
    });
    subscriber.on('error', () => undefined);
    this.redis.on('ready', this.reloadSoon);
    if (await firstConnection(subscriber, 2_000))
      await subscriber.subscribe(this.channel).catch(() => undefined);
    await this.reloads
      .run()
      .catch(() =>
        this.logger.error(
          'redis does not answer: the applications of the API are unknown (their keys refused) until it does',
        ),
      );
  }

  create(application: StoredApplication): Promise<StoredApplication> {
    return this.writes.run(async () => {
      if (!(await this.write(application.id, '', JSON.stringify(application))))
        throw new ApplicationStoreUnavailable(`application '${application.id}' exists already`);
      return this.applied(application.id, application);
    });
  }

  update(id: string, change: (current: StoredApplication) => StoredApplication): Promise<StoredApplication> {
    return this.writes.run(() =>
      this.retried(id, async () => {
        const text = await this.read(id);
        const next = change(this.parse(id, text));
        return (await this.write(id, text, JSON.stringify(next))) ? this.applied(id, next) : null;
      }),
    );
  }

  remove(id: string): Promise<void> {
    return this.writes.run(() =>
      this.retried(id, async () => {
        const text = await this.read(id);
        if (!(await this.write(id, text, ''))) return null;
        this.applied(id, null);
        return true;
      }).then(() => undefined),
    );
  }

  writeAll(writes: readonly ApplicationWrite[]): Promise<void> {
    if (writes.length === 0) return Promise.resolve();
    const ids = writes.map(({ application }) => application.id);
    const scripts = this.redis as unknown as ApplicationScripts;
    return this.writes
      .run(() =>
        this.retried(ids[0]!, async () => {
          const texts = await this.run(() => this.redis.hmget(this.key, ...ids));
          const triples = writes.flatMap(({ application, previous }, i) => {
            const text = texts[i] ?? null;
            const current = text === null ? undefined : this.parse(application.id, text);
            if (!isDeepStrictEqual(current, previous)) throw new ApplicationChanged(application.id);
            return [application.id, text ?? '', JSON.stringify(application)];
          });
          if ((await this.run(() => scripts.applicationsWriteAll(this.key, this.channel, ...triples))) !== 1)
            return null;
          const next = new Map(this.applications);
          for (const { application } of writes) next.set(application.id, application);
          this.publish(next);
          return true;
        }),
      )
      .then(() => undefined);
  }

  /** Runs a read-compare-write until it lands (null: another gateway wrote between), waiting a little. */
  private async retried<T>(id: string, attempt: () => Promise<T | null>): Promise<T> {
    for (let tries = 0; tries < casAttempts; tries += 1) {
      const result = await attempt();
      if (result !== null) return result;
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 4 * (tries + 1)));
    }
    throw new ApplicationStoreUnavailable(
      `application '${id}' keeps changing under concurrent writers; try again`,
    );
  }

  async close(): Promise<void> {
    this.redis.off('ready', this.reloadSoon);
    await this.reloads.close();
    if (this.subscriber) await this.subscriber.quit().catch(() => this.subscriber?.disconnect());
  }

  private async load(): Promise<void> {
    const stored = await this.redis.hgetall(this.key);
    const next = new Map<string, StoredApplication>();
    for (const [id, text] of Object.entries(stored)) {
      const parsed = storedApplicationSchema.safeParse(safeJson(text));
      if (parsed.success) next.set(id, parsed.data);
      else
        this.logger.error(
          { application: id },
          'an application stored in redis is not one this gateway reads: left out',
        );
    }
    this.publish(next);
  }

  /** The application's stored text, read from Redis (not from this process's copy). */
  private async read(id: string): Promise<string> {
    const text = await this.run(() => this.redis.hget(this.key, id));
    if (text === null) throw new ApplicationNotFound(id);
    return text;
  }

  private parse(id: string, text: string): StoredApplication {
    const parsed = storedApplicationSchema.safeParse(safeJson(text));
    if (!parsed.success)
      throw new ApplicationStoreUnavailable(
        `application '${id}' is stored in a form this gateway does not read`,
      );
    return parsed.data;
  }

  private async write(id: string, expected: string, text: string): Promise<boolean> {
    const reply = await this.run(() =>
      this.redis.eval(compareAndSet, 1, this.key, id, expected, text, this.channel),
    );
    return reply === 1;
  }

  /** Makes a write visible to this process at once: its admin reads its own writes. */
  private applied(id: string, application: StoredApplication | null): StoredApplication {
    const next = new Map(this.applications);
    if (application) next.set(id, application);
    else next.delete(id);
    this.publish(next);
    return application!;
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      this.logger.error(
        { err: { message: (error as Error).message } },
        'redis did not take an application write',
      );
      throw new ApplicationStoreUnavailable(
        'the application store (redis) is unavailable; nothing was changed',
      );
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
