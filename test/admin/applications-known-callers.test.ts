import { describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startTestIdentityProvider } from '../helpers/jwks-server.js';
import {
  adminCall,
  applicationDefaultQuotaId,
  petsConfig,
  setQuota,
  startTestGateway,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * With `jwt` (as with ldap and plugin) the applications are the callers the identity provider vouches
 * for: nobody declares them. `GET /applications` lists those the gateway knows: each with a quota of its
 * own or on a plan, and each counted now by the Application Default or a plan. A real gateway, a real
 * JWKS, a real upstream.
 */
const defer = cleanupAfterEach();

async function start(): Promise<{ gateway: TestGateway; token: (client: string) => Promise<string> }> {
  const idp = await startTestIdentityProvider(defer);
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { APIKeyAuthType: 'jwt', jwt: idp.jwt }),
  );
  defer(() => gateway.close());
  return { gateway, token: (client) => idp.token({ client_id: client }) };
}

const listed = async (gateway: TestGateway, query = '') =>
  (await (await adminCall(gateway, 'GET', `/applications${query}`)).json()) as Array<Record<string, unknown>>;

describe('the applications of a jwt gateway, in the portal API', () => {
  it('lists each caller with a quota of its own, on a plan, or counted now by the Application Default', async () => {
    const { gateway, token } = await start();
    expect(await listed(gateway)).toEqual([]);

    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(100, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const gold = await setQuota(gateway, {
      type: 'APPLICATION',
      name: 'Gold',
      restrictions: [throttle(1000, 1, 'minute')],
    });
    expect((await adminCall(gateway, 'PUT', '/applications/partner-b/quota', { plan: gold })).status).toBe(
      200,
    );
    const own = await adminCall(gateway, 'POST', '/applications/partner-c/quota', {
      restrictions: [throttle(5, 1, 'minute')],
    });
    expect(own.status).toBe(201);
    const answer = await fetch(`${gateway.url}/pets/1`, {
      headers: { authorization: `Bearer ${await token('app-a')}` },
    });
    expect(answer.status).toBe(200);

    const known = (applications: Array<Record<string, unknown>>) =>
      applications.map(({ id, known: how, declared, enabled }) => ({ id, known: how, declared, enabled }));
    expect(known(await listed(gateway))).toEqual([
      { id: 'app-a', known: 'usage', declared: false, enabled: true },
      { id: 'partner-b', known: 'quota', declared: false, enabled: true },
      { id: 'partner-c', known: 'quota', declared: false, enabled: true },
    ]);
    expect(known(await listed(gateway, '?field=name&op=like&value=partner'))).toHaveLength(2);
    const one = await adminCall(gateway, 'GET', '/applications/app-a');
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ id: 'app-a', name: 'app-a', known: 'usage' });
  });

  it("refuses to change a caller's application: its identity is the identity provider's", async () => {
    const { gateway } = await start();
    await adminCall(gateway, 'POST', '/applications/partner-c/quota', { restrictions: [] });
    const changed = await adminCall(gateway, 'PUT', '/applications/partner-c', { name: 'Partner C' });
    expect(changed.status).toBe(403);
    expect(await changed.json()).toEqual({
      errors: [
        {
          code: 403,
          message:
            "application 'partner-c' is a caller of the jwt scheme, whose identities are not made here: set its quota at /applications/partner-c/quota",
        },
      ],
    });
  });
});
