import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { adminCall, petsConfig, startTestGateway, throttle } from '../helpers/test-gateway.js';
import { ldapSettingsOf } from '../helpers/slapd-server.js';

/**
 * A plan whose applications are gone from wherever they were named (conf/, the directory) can still be
 * emptied and deleted: its 409 names who is on it, and DELETE /applications/{id}/quota takes off a
 * membership whatever says the application no longer exists.
 */
const defer = cleanupAfterEach();
const ldap = inject('ldap');

const mobile = { id: '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e', name: 'Mobile' };
const tv = { id: 'a7b6c5d4-e3f2-4a1b-9c8d-7e6f5a4b3c2d', name: 'TV' };
const onPlan = (application: string) => `/applications/${encodeURIComponent(application)}/quota`;
const goldPlan = { type: 'APPLICATION', name: 'Gold', restrictions: [throttle(10, 1, 'minute')] };

async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { errors: Array<{ message: string }> }).errors[0]!.message;
}

async function postPlan(gateway: Awaited<ReturnType<typeof startTestGateway>>): Promise<string> {
  const created = await adminCall(gateway, 'POST', '/quotas', goldPlan);
  expect(created.status).toBe(201);
  return ((await created.json()) as { id: string }).id;
}

describe.each([
  ['the memory store', () => ({})],
  ['the Redis store', () => ({ type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` })],
])('a plan whose applications left conf/ (%s)', (_name, store) => {
  it('names them in the 409 of its DELETE, takes each off with DELETE /applications/{id}/quota, and then deletes', async () => {
    const config = (applications: unknown[]) =>
      petsConfig('http://127.0.0.1:9/pets', { store: storeOf, applications });
    const storeOf = store();
    const gateway = await startTestGateway(config([mobile, tv]));
    defer(() => gateway.close());
    const gold = await postPlan(gateway);
    expect((await adminCall(gateway, 'PUT', onPlan(mobile.id), { plan: gold })).status).toBe(200);
    // tv is put on the plan by conf/, then both leave conf/: their memberships stay in the store.
    expect(await gateway.reloadWith(config([{ ...tv, plan: gold }]))).toMatchObject({ applied: true });
    expect(await gateway.reloadWith(config([]))).toMatchObject({ applied: true });

    const refused = await adminCall(gateway, 'DELETE', `/quotas/${gold}`);
    expect(refused.status).toBe(409);
    const message = await errorOf(refused);
    expect(message).toContain(
      `quota '${gold}' is a plan that 2 applications are on ('${mobile.id}', '${tv.id}')`,
    );
    expect(message).toContain('DELETE /applications/{id}/quota');

    expect((await adminCall(gateway, 'GET', onPlan(mobile.id))).status).toBe(200);
    expect((await adminCall(gateway, 'DELETE', onPlan(mobile.id))).status).toBe(204);
    expect(await errorOf(await adminCall(gateway, 'DELETE', `/quotas/${gold}`))).toContain(
      `is a plan that 1 application is on ('${tv.id}')`,
    );
    expect((await adminCall(gateway, 'DELETE', onPlan(tv.id))).status).toBe(204);
    expect((await adminCall(gateway, 'DELETE', `/quotas/${gold}`)).status).toBe(204);

    // An id that names nothing, stored or configured, is still no application.
    const ghost = await adminCall(gateway, 'DELETE', onPlan('ghost'));
    expect(ghost.status).toBe(404);
    expect(await errorOf(ghost)).toBe("no application with id 'ghost'");
    expect((await adminCall(gateway, 'DELETE', onPlan(mobile.id))).status).toBe(404);
  });
});

describe('a plan whose LDAP caller left the directory', () => {
  it('takes off the membership of a DN no entry answers to, so the plan can be deleted', async () => {
    const storeOf = { type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` };
    const ghost = `uid=gone,${ldap.peopleDn}`;
    const config = (quotas: unknown[]) =>
      petsConfig('http://127.0.0.1:9/pets', {
        store: storeOf,
        APIKeyAuthType: 'ldap',
        ldap: ldapSettingsOf(ldap),
        quotas,
      });
    const gateway = await startTestGateway(config([]));
    defer(() => gateway.close());
    const gold = await postPlan(gateway);
    const membership = { id: randomUUID(), application: ghost, plan: gold };
    expect(await gateway.reloadWith(config([membership]))).toMatchObject({ applied: true });
    expect(await gateway.reloadWith(config([]))).toMatchObject({ applied: true });

    const refused = await adminCall(gateway, 'DELETE', `/quotas/${gold}`);
    expect(await errorOf(refused)).toContain(`is a plan that 1 application is on ('${ghost}')`);
    expect((await adminCall(gateway, 'GET', onPlan(ghost))).status).toBe(200);
    expect((await adminCall(gateway, 'DELETE', onPlan(ghost))).status).toBe(204);
    expect((await adminCall(gateway, 'GET', onPlan(ghost))).status).toBe(404);
    expect((await adminCall(gateway, 'DELETE', `/quotas/${gold}`)).status).toBe(204);
  });
});
