import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  basicAuth,
  devKey,
  petsApiId,
  petsConfig,
  startGatewayOverUpstream,
  userAuth,
  type GatewayOverUpstream,
} from '../helpers/test-gateway.js';

/**
 * What the admin port says of operations with schemes of their own: the catalog's OpenAPI `security`
 * per operation, the console's "try it" with each operation's credentials, and the usage path, which
 * takes the credentials of every scheme in use. A real gateway over an echoing upstream.
 */
const secret = 'a-shared-secret-of-at-least-32-bytes!';
const token = () =>
  new SignJWT({ iss: 'idp', aud: 'api', sub: 'user-1', client_id: 'app-a' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(secret));

const ids = {
  listPets: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21',
  status: '1d2c3b4a-5f6e-4a7b-8c9d-0e1f2a3b4c5e',
  orders: '8f7e6d5c-4b3a-4291-8a0f-9e8d7c6b5a49',
  invoices: '9a8f7e6d-5c4b-4a39-8b1f-0a9e8d7c6b5a',
};

let served: GatewayOverUpstream;
beforeAll(async () => {
  served = await startGatewayOverUpstream((url) =>
    petsConfig(`${url}/pets`, {
      jwt: { issuer: 'idp', audience: 'api', secret },
      apis: [
        {
          id: petsApiId,
          name: 'Pet Store',
          basePath: '/pets',
          upstream: `${url}/pets`,
          methods: [
            { id: ids.listPets, name: 'listPets', verb: 'GET', path: '/' },
            { id: ids.status, name: 'status', verb: 'GET', path: '/status', auth: 'none' },
          ],
        },
        {
          id: '7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918',
          name: 'Partners',
          basePath: '/partners',
          upstream: `${url}/partners`,
          auth: 'jwt',
          methods: [
            { id: ids.orders, name: 'orders', verb: 'GET', path: '/orders' },
            { id: ids.invoices, name: 'invoices', verb: 'GET', path: '/invoices', auth: ['jwt', 'basic'] },
          ],
        },
      ],
    }),
  );
});
afterAll(() => served.close());

const admin = (path: string, init: RequestInit = {}) =>
  fetch(`${served.gateway.adminUrl}/api/portal/v1.3${path}`, {
    ...init,
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json' },
  });
const tryIt = async (body: Record<string, unknown>) => {
  const res = await admin('/console/try', { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
};

type Operation = { security?: unknown; responses: Record<string, unknown>; 'x-quotagate-auth'?: unknown };

describe('the admin port with a scheme per operation', () => {
  it("documents each operation's own security in the catalog's OpenAPI, and the 401 only where one can come", async () => {
    const document = (await (await admin('/apis/openapi.json')).json()) as {
      security: unknown;
      paths: Record<string, Record<string, Operation>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    expect(document.security).toEqual([{ basic: [] }]);
    const operation = (path: string) => document.paths[path]!.get!;
    expect(operation('/pets').security).toBeUndefined();
    expect(operation('/pets').responses['401']).toBeDefined();
    expect(operation('/pets/status')).toMatchObject({ security: [], 'x-quotagate-auth': 'none' });
    expect(operation('/pets/status').responses['401']).toBeUndefined();
    expect(operation('/partners/orders').security).toEqual([{ jwt: [] }]);
    expect(operation('/partners/invoices').security).toEqual([{ jwt: [] }, { basic: [] }]);
    expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['basic', 'jwt']);
  });

  it("sends each test request with the credentials of the operation's scheme", async () => {
    expect(await tryIt({ method: 'GET', path: '/pets/status' })).toMatchObject({
      status: 200,
      json: { status: 200 },
    });
    const withoutToken = await tryIt({ method: 'GET', path: '/partners/orders' });
    expect(withoutToken.status).toBe(400);
    expect(JSON.stringify(withoutToken.json)).toContain('token: is required with the jwt scheme');
    const withToken = await tryIt({ method: 'GET', path: '/partners/orders', token: await token() });
    expect(withToken.json.status).toBe(200);
    // A list with a key scheme takes the project's key, as the console's form asks nothing for it.
    expect((await tryIt({ method: 'GET', path: '/partners/invoices' })).json.status).toBe(200);
    // A path spelled to reach a jwt operation through the public one is tried as the jwt operation.
    const spelled = await tryIt({ method: 'GET', path: '/pets/status/../../partners/orders' });
    expect(spelled.status).toBe(400);
  });

  it('reads the usage of a caller of any scheme in use, and challenges with each of them', async () => {
    const usage = (headers: Record<string, string>) =>
      request(served.gateway.url, { path: '/_quotagate/usage', headers });
    const asKey = await usage({ authorization: basicAuth(devKey) });
    expect(asKey.status).toBe(200);
    expect(JSON.parse(asKey.body)).toMatchObject({ application: { id: 'project' } });
    const asToken = await usage({ authorization: `Bearer ${await token()}` });
    expect(asToken.status).toBe(200);
    expect(JSON.parse(asToken.body)).toMatchObject({ application: { id: 'app-a' } });
    const anonymous = await usage({});
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe(
      'Basic realm="quotagate", charset="UTF-8", Bearer realm="quotagate"',
    );
  });
});
