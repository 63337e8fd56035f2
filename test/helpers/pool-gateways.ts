import { auth } from './proxy-parts.js';
import { request } from './raw-http.js';
import type { FakeClock } from './fake-clock.js';
import { petsConfig, startTestGateway, type TestGateway } from './test-gateway.js';
import type { TestUpstream } from './upstream.js';

/** The pets API of the test config, with `upstream` as given (a pool). */
export function poolConfig(upstream: Record<string, unknown>): Record<string, unknown> {
  const config = petsConfig('http://127.0.0.1:1');
  const [pets] = config.apis as Array<Record<string, unknown>>;
  return { ...config, apis: [{ ...pets, upstream }] };
}

/**
 * A gateway whose pets API has `upstream` (a pool), on `clock`'s timers when given, closed through
 * `defer` (a test file's `cleanupAfterEach`).
 */
export async function startPoolGateway(
  defer: (cleanup: () => Promise<void>) => void,
  upstream: Record<string, unknown>,
  clock?: FakeClock,
): Promise<TestGateway> {
  const gateway = await startTestGateway(poolConfig(upstream), {}, clock ? { timers: clock } : {});
  defer(() => gateway.close());
  return gateway;
}

/** The requests of the API (not the health checks) that reached `upstream`. */
export const served = (upstream: TestUpstream) =>
  upstream.requests.filter(({ url }) => url !== '/healthz').length;

/** The statuses of `count` authenticated GETs of `/pets/<i>`, sent one after another. */
export async function getMany(gateway: TestGateway, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i += 1)
    statuses.push((await request(gateway.url, { path: `/pets/${i}`, headers: auth })).status);
  return statuses;
}
