import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startFleetOfTwo } from '../helpers/enforcement-gateways.js';
import { rsaKey, signToken, startJwksServer, type JwksServer } from '../helpers/jwks-server.js';
import { request } from '../helpers/raw-http.js';
import { adminUser, throttle, userAuth } from '../helpers/test-gateway.js';

const defer = cleanupAfterEach();
let jwks: JwksServer;
beforeAll(async () => {
  jwks = await startJwksServer([]);
});
afterAll(() => jwks.close());

describe('a jwt application across a fleet on Redis', () => {
  it('counts one quota of the claim value for both gateways', async () => {
    const key = await rsaKey('key-1');
    jwks.keys = [key.publicJwk];
    const jwt = { jwksUri: jwks.url, issuer: 'idp', audience: 'api' };
    // The counters' clock stands still, so that no window ends between the three requests.
    const clock = () => 1_800_000_000_000;
    const [a, b] = await startFleetOfTwo(
      defer,
      { APIKeyAuthType: 'jwt', jwt },
      { clocks: [{ clock }, { clock }] },
    );
    const portal = '/api/portal/v1.3/applications/app-a/quota';
    const made = await fetch(`${a.adminUrl}${portal}`, {
      method: 'POST',
      headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'APPLICATION', name: 'A', restrictions: [throttle(2, 1, 'minute')] }),
    });
    expect(made.status).toBe(201);
    await expect
      .poll(
        async () =>
          (await fetch(`${b.adminUrl}${portal}`, { headers: { authorization: userAuth(adminUser) } })).status,
      )
      .toBe(200);
    const token = await signToken(key, { iss: 'idp', aud: 'api', client_id: 'app-a' });
    const statuses: number[] = [];
    for (const gateway of [a, b, a])
      statuses.push(
        (await request(gateway.url, { path: '/pets/1', headers: { authorization: `Bearer ${token}` } }))
          .status,
      );
    expect(statuses).toEqual([200, 200, 429]);
  });
});
