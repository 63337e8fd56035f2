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
import { suiteRedis } from '../helpers/redis-clients.js';
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

const redis = suiteRedis();

/** The Redis server's time, in milliseconds: the clock the slots of a gateway on its own clock live by. */
async function redisTime(): Promise<number> {
  const [seconds, microseconds] = await redis().time();
  return Number(seconds) * 1_000 + Math.floor(Number(microseconds) / 1_000);
}

/** The holders' entries of the concurrency counters under `prefix`: slots held, and until when. */
async function slotEntries(prefix: string): Promise<Array<{ slots: number; expiresAt: number }>> {
  const connection = redis();
  const entries = [];
  for (const key of await connection.keys(`${prefix}*`)) {
    if ((await connection.type(key)) !== 'hash') continue;
    for (const value of Object.values(await connection.hgetall(key))) {
      const [, slots, expiresAt] = /^(\d+):(\d+)$/.exec(value) ?? [];
      if (slots) entries.push({ slots: Number(slots), expiresAt: Number(expiresAt) });
    }
  }
  return entries;
}

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
    const prefix = `test:killed:${randomUUID()}:`;
    const store = { type: 'redis', url: inject('redisUrl'), prefix };
    // The survivor reads the slots at a time the test sets, from the Redis server's time: the victim's
    // entry lives until a time of that clock.
    const clock = { now: await redisTime() };
    const survivor = await startTestGateway(
      petsConfig(upstream.url, { store }),
      {},
      { clock: () => clock.now },
    );
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
    const diedBy = await redisTime();
    await Promise.all(held);
    // What its last heartbeat wrote: 2 slots, alive at most one time to live (3 s) past its death.
    const entries = await slotEntries(prefix);
    expect(entries).toHaveLength(1);
    const [entry] = entries;
    expect(entry?.slots).toBe(2);
    expect(entry!.expiresAt - diedBy).toBeLessThanOrEqual(3_000);
    clock.now = entry!.expiresAt - 1;
    expect(await inFlightOf(survivor.adminUrl)).toBe(2);
    clock.now = entry!.expiresAt;
    expect(await inFlightOf(survivor.adminUrl)).toBe(0);
    const next = get(survivor);
    await expect.poll(() => upstream.held()).toBe(1);
    upstream.answerAll();
    expect((await next).status).toBe(200);
  }, 30_000);
});
