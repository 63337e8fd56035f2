import path from 'node:path';
import { ConfigError } from '../kit/config-error.js';
import type { Config, MemoryStoreConfig } from '../config/schema.js';
import type { Logger } from '../observe/log.js';
import type { RedisConnection } from '../redis/connect-redis.js';
import { sharedIdProblems } from '../applications/application-directory.js';
import type { ApplicationRepository } from '../applications/application-repository.js';
import {
  ApplicationStoreCorrupt,
  FileApplicationRepository,
} from '../applications/file-application-repository.js';
import { RedisApplicationRepository } from './redis-application-repository.js';

/** The file of the memory store's applications: `store.applicationsFile`, else beside `store.file`. */
export function applicationsFileOf(
  store: Readonly<Pick<MemoryStoreConfig, 'file' | 'applicationsFile'>>,
  cwd: string,
): string {
  return path.resolve(
    cwd,
    store.applicationsFile ?? path.join(path.dirname(store.file), 'applications.json'),
  );
}

/**
 * The repository of the applications made through the portal API, in the store of `store.type`, opened.
 * @throws ConfigError when the memory store's file cannot be read as applications (left as it is).
 */
export async function openApplicationRepository(
  config: Readonly<Config>,
  redis: RedisConnection | null,
  context: { logger: Logger; cwd: string },
): Promise<ApplicationRepository> {
  const logger = context.logger.child({ component: 'applications' });
  const { store } = config;
  const repository =
    store.type === 'memory'
      ? new FileApplicationRepository(applicationsFileOf(store, context.cwd), logger)
      : new RedisApplicationRepository(redis!, store.prefix, logger);
  try {
    await repository.open();
    const problems = sharedIdProblems(config.applications, repository.all());
    if (problems.length > 0) throw new ConfigError(problems);
  } catch (error) {
    await repository.close();
    if (error instanceof ApplicationStoreCorrupt)
      throw new ConfigError([`store.applicationsFile: ${error.message}`]);
    throw error;
  }
  return repository;
}
