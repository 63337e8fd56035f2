import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  petsConfig,
  startGatewayOverUpstream,
  type TestGateway,
  withMethods,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * The README refuses X-HTTP-Method-Override and its kin because "the upstream would run another
 * operation than the one routed, authenticated and counted". The same frameworks take the verb from a
 * `_method` query parameter of a POST too: Symfony's Request::getMethod() (and so Laravel, which turns
 * the override on by default) reads `_method` from the query, and Express's method-override reads it with
 * `methodOverride('_method')`. `POST /pets/1?_method=DELETE` is routed and counted as updatePet and runs
 * deletePet.
 */

const authorization = basicAuth(devKey);
const deletePetId = '3a6b9c2d-1e4f-4a5b-8c7d-0e1f2a3b4c5d';

let upstream: TestUpstream;
let gateway: TestGateway;

let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream((url) =>
    withMethods(petsConfig(`${url}/pets`), [
      { id: '6d9e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a', name: 'updatePet', verb: 'POST', path: '/{petId}' },
      { id: deletePetId, name: 'deletePet', verb: 'DELETE', path: '/{petId}' },
    ]),
  );
  ({ upstream, gateway } = setup);
});

afterAll(() => setup.close());

describe('a verb override in the query', () => {
  it.each([
    '/pets/1?_method=DELETE',
    '/pets/1?name=rex&_method=delete',
    '/pets/1?%5Fmethod=DELETE',
    '/pets/1?%5f%6d%65%74%68%6f%64=DELETE',
    '/pets/1?.method=DELETE',
    '/pets/1?+_method=DELETE',
    '/pets/1?%20.method=DELETE',
    '/pets/1?_method[]=DELETE',
    '/pets/1?_METHOD=DELETE',
  ])('answers 400 to POST %s and sends nothing upstream', async (path) => {
    const before = upstream.requests.length;
    const res = await request(gateway.url, {
      method: 'POST',
      path,
      headers: { authorization, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(400);
    expect(upstream.requests.length).toBe(before);
  });

  it.each(['/pets/1?method=DELETE', '/pets/1?my_method=x', '/pets/1?_methods=1', '/pets/1?q=_method'])(
    'forwards POST %s, whose parameters frameworks do not read as the verb',
    async (path) => {
      const res = await request(gateway.url, {
        method: 'POST',
        path,
        headers: { authorization, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.status).toBe(200);
    },
  );
});
