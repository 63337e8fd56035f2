import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  petsApiId,
  petsConfig,
  setQuota,
  startGatewayOverUpstream,
  startTestGateway,
  type TestGateway,
  accessLines,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * Spellings of a path, against the router and the upstream: every spelling the gateway forwards is
 * counted as the operation the upstream runs, and a spelling whose meaning differs between common
 * upstream stacks never reaches the upstream.
 */

const findByStatusId = '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f';
const auth = { authorization: basicAuth(devKey) };

let upstream: TestUpstream;
let gateway: TestGateway;

let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream((url) => petsConfig(`${url}/v2/pets`));
  ({ upstream, gateway } = setup);
});

afterAll(() => setup.close());

const lastAccessLine = async () => {
  await new Promise((resolve) => setImmediate(resolve));
  return accessLines(gateway).at(-1);
};

describe('path spellings that upstream stacks route differently', () => {
  it.each([
    '/pets/findbystatus',
    '/PETS/FINDBYSTATUS',
    '/Pets/FindByStatus/',
    '/pets/%66indbystatus',
    '/pets/x/../findBySTATUS',
  ])('counts %s as findByStatus and forwards the catalog spelling', async (spelling) => {
    const res = await request(gateway.url, { path: `${spelling}?status=sold`, headers: auth });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toMatch(/^\/v2\/pets\/findByStatus\/?\?status=sold$/);
    expect(await lastAccessLine()).toMatchObject({ method: 'findByStatus', status: 200 });
  });

  it('keeps the limit of findByStatus for every spelling of it', async () => {
    await setQuota(gateway, {
      type: 'API',
      name: 'findByStatus twice a minute',
      restrictions: [
        {
          api: petsApiId,
          method: findByStatusId,
          type: 'throttle',
          config: { messages: '2', per: '1', period: 'minute' },
        },
      ],
    });
    const statuses: number[] = [];
    for (const spelling of [
      '/pets/findByStatus',
      '/pets/FINDBYSTATUS',
      '/pets/findbystatus',
      '/PETS/FindByStatus',
    ])
      statuses.push((await request(gateway.url, { path: spelling, headers: auth })).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
  });

  it.each([
    ['a matrix parameter', '/pets/1;jsessionid=0123'],
    ['a matrix parameter after a dot segment', '/pets/..;/findByStatus'],
    ['an encoded semicolon', '/pets/1%3bx'],
    ['a trailing dot', '/pets/findByStatus.'],
    ['a trailing encoded dot', '/pets/findByStatus%2e'],
    ['a trailing space', '/pets/findByStatus%20'],
    ['an encoded percent sign (double decoding)', '/pets/%2566indByStatus'],
    ['an encoded control character', '/pets/1%0d%0aX-Injected:%201'],
    ['an overlong UTF-8 dot', '/pets/%c0%ae%c0%ae/admin'],
    ['an encoded slash', '/pets/1%2f..%2fadmin'],
    ['an encoded backslash', '/pets/1%5c..%5cadmin'],
    ['a fragment after the query', '/pets/1?x=1#frag'],
    ['a fragment an exemption could be read in', '/pets/1?#/public/logo.png'],
    ['an empty fragment', '/pets/findByStatus?status=sold#'],
    ['a Kelvin sign, which ignore-case matching reads as k', '/pets/%E2%84%AAennel'],
  ])('answers 400 to %s and sends nothing upstream', async (_name, path) => {
    const before = upstream.requests.length;
    const res = await request(gateway.url, { path, headers: auth });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ id: 'com.vendor.api.bad_request' });
    expect(upstream.requests.length).toBe(before);
  });
});

describe('a caseSensitive API', () => {
  let strict: TestGateway;

  beforeAll(async () => {
    const config = petsConfig(`${upstream.url}/v2/pets`);
    const [api] = config.apis as Array<Record<string, unknown>>;
    strict = await startTestGateway({ ...config, apis: [{ ...api, caseSensitive: true }] });
  });

  afterAll(() => strict.close());

  it('matches literals only in their case: /pets/findbystatus is getPet there', async () => {
    const res = await request(strict.url, { path: '/pets/findbystatus', headers: auth });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe('/v2/pets/findbystatus');
    await new Promise((resolve) => setImmediate(resolve));
    const line = accessLines(strict).at(-1);
    expect(line).toMatchObject({ method: 'getPet' });
    expect((await request(strict.url, { path: '/PETS/1', headers: auth })).status).toBe(404);
  });
});
