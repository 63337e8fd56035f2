import type { TestProject } from 'vitest/node';
import { startRedis } from './redis-server.js';
import { startSlapd } from './slapd-server.js';

interface Stoppable {
  stop(): Promise<void>;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [redis, ldap] = await startTogether(startRedis(), startSlapd());
  const { stop: stopLdap, ...ldapFixture } = ldap;
  project.provide('redisUrl', redis.url);
  project.provide('ldap', ldapFixture);
  return async () => {
    await Promise.all([redis.stop(), stopLdap()]);
  };
}

/** Starts services concurrently; if any fails, stops those that did start so none is left running. */
async function startTogether<A extends Stoppable, B extends Stoppable>(
  a: Promise<A>,
  b: Promise<B>,
): Promise<[A, B]> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'fulfilled' && second.status === 'fulfilled') return [first.value, second.value];
  const results = [first, second];
  await Promise.all(
    results.map((result) => (result.status === 'fulfilled' ? result.value.stop() : undefined)),
  );
  const reasons = results.flatMap((result) =>
    result.status === 'rejected' ? [result.reason as unknown] : [],
  );
  if (reasons.length === 1) throw reasons[0];
  throw new Error(`Test services failed to start:\n${reasons.map(String).join('\n')}`);
}
