import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startHoldingUpstream } from '../helpers/holding-upstream.js';
import {
  adminUser,
  concurrency,
  petsConfig,
  quotaUsage,
  systemQuotaId,
  userAuth,
} from '../helpers/test-gateway.js';
import { get, useWorkerGateways } from '../helpers/worker-gateways.js';

/** `workers: 2` on the memory store: the primary holds the slots, so both workers share one limit. */
const defer = cleanupAfterEach();
const { startGateway, answeredByWorker } = useWorkerGateways();

describe('workers: 2 on the memory store', () => {
  it('share one concurrency limit through the primary, and the primary frees the slots of a worker that dies', async () => {
    const upstream = await startHoldingUpstream();
    defer(() => upstream.close());
    const gateway = await startGateway({ workers: 2, apis: petsConfig(upstream.url).apis });
    const res = await fetch(`${gateway.admin}/api/portal/v1.3/quotas/${systemQuotaId}`, {
      method: 'PUT',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'API', name: 'System', restrictions: [concurrency(2)] }),
    });
    expect(res.status).toBe(200);
    const inFlight = async () => (await quotaUsage(gateway.admin, systemQuotaId)).restrictions[0]!.used;

    // Each on a connection of its own: node:cluster hands connections to the workers in turn.
    const held = [get(gateway, '/pets/1'), get(gateway, '/pets/2')].map((answer) => answer.catch(() => 0));
    await expect.poll(() => upstream.held()).toBe(2);
    const refused = await Promise.all([get(gateway, '/pets/3'), get(gateway, '/pets/4')]);
    expect(refused).toEqual([429, 429]);
    expect(await inFlight()).toBe(2);
    // Both workers answered (the refusals), so the limit held across them, not per worker.
    await expect.poll(() => answeredByWorker(gateway).size).toBe(2);

    // The worker that holds the first request dies; each held request is a worker's by its id's prefix
    // (16 characters a process draws), and the refusals' access lines name the pid of each prefix.
    const prefixOf = (id: unknown) => String(id).slice(0, 16);
    const pidOf = new Map(
      gateway
        .logs()
        .filter((line) => line.component === 'access')
        .map((line) => [prefixOf(line.requestId), line.pid as number]),
    );
    const heldBy = upstream.requests.map((seen) => pidOf.get(prefixOf(seen.headers['x-request-id'])));
    expect(heldBy.every((pid) => pid !== undefined)).toBe(true);
    const victim = heldBy[0]!;
    const victimHeld = heldBy.filter((pid) => pid === victim).length;
    process.kill(victim, 'SIGKILL');
    await gateway.cli.waitFor('"msg":"worker exited; starting another"');
    // What the dead worker held is free; what the other holds stays held until it ends.
    await expect.poll(inFlight).toBe(2 - victimHeld);
    upstream.answerAll();
    await Promise.all(held);
    await expect.poll(inFlight).toBe(0);
  }, 60_000);
});
