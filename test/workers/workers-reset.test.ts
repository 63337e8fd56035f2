import { describe, expect, it } from 'vitest';
import { adminUser, applicationDefaultQuotaId, throttle, userAuth } from '../helpers/test-gateway.js';
import { burst, useWorkerGateways } from '../helpers/worker-gateways.js';

const { startGateway, answeredByWorker } = useWorkerGateways();

describe('a quota reset with workers: 2 on the memory store', () => {
  it('reaches both workers: the application has the whole limit again, across them', async () => {
    const gateway = await startGateway({ workers: 2 });
    const admin = (method: string, path: string, body?: unknown) =>
      fetch(`${gateway.admin}/api/portal/v1.3${path}`, {
        method,
        headers: {
          authorization: userAuth(adminUser),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const set = await admin('PUT', `/quotas/${applicationDefaultQuotaId}`, {
      type: 'APPLICATION',
      name: 'Application Default',
      restrictions: [throttle(6, 1, 'hour')],
    });
    expect(set.status).toBe(200);
    const tally = (statuses: number[]) => statuses.filter((status) => status === 200).length;
    // Spend the limit (the workers take the quota as their primary sends it), until both refuse.
    await expect.poll(async () => tally(await burst(gateway, 4)), { timeout: 5_000 }).toBe(0);
    expect((await admin('POST', '/applications/project/quota/reset')).status).toBe(204);
    // A worker refuses on the old counter until the primary's message reaches it, and a refusal charges
    // nothing: what passes from the reset on is the whole limit, and not one more.
    let passed = 0;
    await expect.poll(async () => (passed += tally(await burst(gateway, 2))), { timeout: 5_000 }).toBe(6);
    expect(tally(await burst(gateway, 10))).toBe(0);
    // Both workers answered, so the reset reached each of them.
    await expect.poll(() => answeredByWorker(gateway).size).toBe(2);
  });
});
