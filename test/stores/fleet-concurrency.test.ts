import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import {
  basicAuth,
  concurrency,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { useWorkerGateways } from '../helpers/worker-gateways.js';

/**
 * A concurrency restriction on the Redis store holds for the whole fleet, and a gateway that dies holding
 * slots leaves none held: its entry expires with its heartbeat's time to live (3 s).
 */
const defer = cleanupAfterEach();
const { startGateway } = useWorkerGateways();

const setSystem = (gateway: TestGateway, connections: number) =>
  setQuota(gateway, { type: 'API', name: 'System', restrictions: [concurrency(connections)] }, systemQuotaId);

const inFlightOf = async (adminUrl: string) =>
  (await quotaUsage(adminUrl, systemQuotaId)).restrictions[0]!.used;

describe('a concurrency restriction on a fleet of 2 (Redis)', () => {
  it('admits N requests in flight across the fleet, wherever they arrive', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const [a, b] = await startFleetOfTwo(defer, {}, { upstream });
    await setSystem(a, 3);
    // b follows the definitions a wrote (pub/sub).
    await expect.poll(async () => (await quotaUsage(b.adminUrl, systemQuotaId)).restrictions.length).toBe(1);
    const held = [get(a), get(a)];
    await expect.poll(() => upstream.held()).toBe(2);
    held.push(get(b));
    await expect.poll(() => upstream.held()).toBe(3);
    const [fromA, fromB] = await Promise.all([get(a), get(b)]);
    expect([fromA.status, fromB.status]).toEqual([429, 429]);
    expect(fromB.headers['retry-after']).toBe('1');
    expect(await inFlightOf(b.adminUrl)).toBe(3);
    upstream.answerOne();
    await expect.poll(() => inFlightOf(b.adminUrl)).toBe(2);
    held.push(get(b));
    await expect.poll(() => upstream.held()).toBe(3);
    upstream.answerAll();
    for (const answer of held) expect((await answer).status).toBe(200);
    await expect.poll(() => inFlightOf(a.adminUrl)).toBe(0);
  });

  it('frees the slots of a gateway killed while it held them, within its heartbeat time to live', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const store = { type: 'redis', url: inject('redisUrl'), prefix: `test:killed:${randomUUID()}:` };
    const survivor = await startTestGateway(petsConfig(upstream.url, { store }));
    defer(() => survivor.close());
    await setSystem(survivor, 2);
    const victim = await startGateway({ apis: petsConfig(upstream.url).apis, store });
    // The victim's answers never come: it dies holding them.
    const headers = { authorization: basicAuth(devKey) };
    const held = [1, 2].map((pet) => fetch(`${victim.url}/pets/${pet}`, { headers }).catch(() => null));
    await expect.poll(() => upstream.held()).toBe(2);
    expect((await get(survivor)).status).toBe(429);

    victim.cli.child.kill('SIGKILL');
    await victim.cli.exited;
    await Promise.all(held);
    await expect.poll(() => inFlightOf(survivor.adminUrl), { timeout: 10_000, interval: 250 }).toBe(0);
    const next = get(survivor);
    await expect.poll(() => upstream.held()).toBe(1);
    upstream.answerAll();
    expect((await next).status).toBe(200);
  }, 30_000);
});
