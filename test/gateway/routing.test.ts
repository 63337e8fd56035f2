import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let upstream: TestUpstream;
let gateway: TestGateway;
const auth = { authorization: basicAuth(devKey) };

beforeAll(async () => {
  upstream = await startUpstream();
  gateway = await startTestGateway(petsConfig(`${upstream.url}/v2/pets`));
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

const lastAccessLine = () => gateway.logs.filter((line) => line.msg === 'request').at(-1);

describe('routing through the catalog', () => {
  it('forwards the normalized path under the upstream prefix, with the query', async () => {
    const res = await request(gateway.url, { path: '/pets/1?status=sold', headers: auth });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe('/v2/pets/1?status=sold');
  });

  it.each(['/pets/../pets/1', '//pets/1', '/pets/./1', '/%70ets/1'])(
    'routes %s to the getPet method and forwards /v2/pets/1',
    async (spelling) => {
      const res = await request(gateway.url, { path: spelling, headers: auth });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body).url).toBe('/v2/pets/1');
      await new Promise((resolve) => setImmediate(resolve));
      expect(lastAccessLine()).toMatchObject({ api: 'Pet Store', method: 'getPet', status: 200 });
    },
  );

  it('routes /pets/%2e%2e/x out of the API, where nothing matches: 404', async () => {
    const res = await request(gateway.url, { path: '/pets/%2e%2e/x', headers: auth });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.not_found',
      message: 'Not Found',
      success: false,
    });
  });

  it.each(['/pets\\x', '/pets/%2f1', '/pets/%5c1', '/pets/%00', '/../pets/1', '/pets/%zz'])(
    'rejects %s with 400 JSON before it reaches the upstream',
    async (spelling) => {
      const before = upstream.requests.length;
      const res = await request(gateway.url, { path: spelling, headers: auth });
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toBe('application/json');
      expect(JSON.parse(res.body)).toEqual({
        id: 'com.vendor.api.bad_request',
        message: 'Bad Request',
        success: false,
      });
      expect(upstream.requests.length).toBe(before);
    },
  );

  it('rejects an absolute-form target aimed at another host with 400', async () => {
    const res = await request(gateway.url, { path: 'http://other.test/pets/1', headers: auth });
    expect(res.status).toBe(400);
  });

  it('accepts an absolute-form target that names the gateway itself', async () => {
    const host = new URL(gateway.url).host;
    const res = await request(gateway.url, { path: `http://${host}/pets/1`, headers: auth });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe('/v2/pets/1');
  });

  it('answers 404 JSON for a path outside every API, without asking for credentials', async () => {
    const res = await request(gateway.url, { path: '/store/inventory' });
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json');
  });

  it('never answers admin routes on the data port', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect((await request(gateway.url, { path, headers: auth })).status).toBe(404);
    }
  });

  it('answers 404 to a path inside the API that no method declares, and sends nothing upstream', async () => {
    const before = upstream.requests.length;
    for (const path of ['/pets/1/owners', '/pets/1/owners/2', '/pets/findByStatus/x']) {
      const res = await request(gateway.url, { path, headers: auth });
      expect(res.status, path).toBe(404);
      expect(JSON.parse(res.body)).toMatchObject({ id: 'com.vendor.api.not_found' });
    }
    expect(upstream.requests.length).toBe(before);
  });

  it.each(['DELETE', 'PUT', 'PATCH', 'OPTIONS', 'PROPFIND', 'MKCOL', 'LOCK', 'SEARCH', 'PURGE'])(
    'answers 405 with Allow to %s on a declared path, and sends nothing upstream',
    async (verb) => {
      const before = upstream.requests.length;
      const res = await request(gateway.url, { path: '/pets/1', method: verb, headers: auth });
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('GET, HEAD');
      expect(JSON.parse(res.body)).toEqual({
        id: 'com.vendor.api.method_not_allowed',
        message: 'Method Not Allowed',
        success: false,
      });
      expect(upstream.requests.length).toBe(before);
    },
  );

  it('lists every verb declared for the path in Allow', async () => {
    const res = await request(gateway.url, { path: '/pets', method: 'DELETE', headers: auth });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, POST, HEAD');
  });

  it('answers an undeclared operation before authentication, like a path outside every API', async () => {
    expect((await request(gateway.url, { path: '/pets/1', method: 'DELETE' })).status).toBe(405);
    expect((await request(gateway.url, { path: '/pets/1/owners' })).status).toBe(404);
  });

  it('matches HEAD as GET and forwards it as HEAD', async () => {
    const res = await request(gateway.url, { path: '/pets/3', method: 'HEAD', headers: auth });
    expect(res.status).toBe(200);
    expect(upstream.requests.at(-1)).toMatchObject({ method: 'HEAD', url: '/v2/pets/3' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lastAccessLine()).toMatchObject({ method: 'getPet', verb: 'HEAD' });
  });
});

describe('an API with passUndeclared', () => {
  let open: TestGateway;

  beforeAll(async () => {
    const config = petsConfig(`${upstream.url}/v2/pets`);
    const [api] = config.apis as Array<Record<string, unknown>>;
    open = await startTestGateway({ ...config, apis: [{ ...api, passUndeclared: true }] });
  });

  afterAll(() => open.close());

  it('forwards paths and verbs that no method declares, logged with method null', async () => {
    for (const [verb, path] of [
      ['DELETE', '/pets/1/owners'],
      ['PROPFIND', '/pets/1'],
      ['GET', '/pets/1/owners'],
    ] as const) {
      const res = await request(open.url, { path, method: verb, headers: auth });
      expect(res.status, `${verb} ${path}`).toBe(200);
      expect(JSON.parse(res.body)).toMatchObject({ method: verb, url: `/v2${path}` });
      await new Promise((resolve) => setImmediate(resolve));
      const line = open.logs.filter((entry) => entry.msg === 'request').at(-1);
      expect(line).toMatchObject({ api: 'Pet Store', method: null });
    }
  });

  it('still authenticates them', async () => {
    expect((await request(open.url, { path: '/pets/1/owners', method: 'DELETE' })).status).toBe(401);
  });
});

describe('basic authentication (first version)', () => {
  const unauthorized = '{"id":"com.vendor.api.unauthorized","message":"Unauthorized","success":false}';

  it('answers a request without a key with 401, the exact body and a Basic challenge', async () => {
    const res = await request(gateway.url, { path: '/pets/1' });
    expect(res.status).toBe(401);
    expect(res.body).toBe(unauthorized);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['www-authenticate']).toMatch(/^Basic realm="quotagate"/);
  });

  it.each([
    ['the production key in development', basicAuth('prod-key-0123456789abcdef012345678')],
    ['a key with a password', `Basic ${Buffer.from(`${devKey}:pw`).toString('base64')}`],
    ['an unknown key', basicAuth('unknown-key-0123456789abcdef')],
    ['malformed base64', 'Basic !!!'],
    ['no colon', `Basic ${Buffer.from(devKey).toString('base64')}`],
    ['another scheme', `Bearer ${devKey}`],
  ])('rejects %s with 401', async (_case, authorization) => {
    const res = await request(gateway.url, { path: '/pets/1', headers: { authorization } });
    expect(res.status).toBe(401);
    expect(res.body).toBe(unauthorized);
  });

  it('accepts the scheme name in any case', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { authorization: basicAuth(devKey).replace('Basic', 'bAsIc') },
    });
    expect(res.status).toBe(200);
  });
});

describe('the access line of an answer the gateway made', () => {
  const lineOf = async (id: string) => {
    await expect.poll(() => gateway.logs.some((line) => line.requestId === id)).toBe(true);
    return gateway.logs.find((line) => line.requestId === id)!;
  };

  it.each([
    ['a missing key (401)', 'GET', '/pets/1', {}, 401],
    ['no such API (404)', 'GET', '/nowhere', auth, 404],
    ['another verb of a declared path (405)', 'DELETE', '/pets/1', auth, 405],
  ] as const)('counts the body of %s in bytesOut', async (_case, method, path, headers, status) => {
    const id = `made-${status}`;
    const res = await request(gateway.url, { method, path, headers: { ...headers, 'x-request-id': id } });
    expect(res.status).toBe(status);
    const line = await lineOf(id);
    expect(line.status).toBe(status);
    expect(line.bytesOut).toBe(Buffer.byteLength(res.body));
    expect(line.bytesOut).toBeGreaterThan(0);
  });

  it('counts no body for an answer to a HEAD, which has none', async () => {
    const res = await request(gateway.url, {
      method: 'HEAD',
      path: '/pets/1',
      headers: { 'x-request-id': 'made-head' },
    });
    expect(res.status).toBe(401);
    expect((await lineOf('made-head')).bytesOut).toBe(0);
  });
});

describe('who and what the access line names', () => {
  it('logs the routed path without its query, and the socket peer whose X-Forwarded-For is not believed', async () => {
    const res = await request(gateway.url, {
      path: '/PETS/./1?token=secret-value',
      headers: { ...auth, 'x-request-id': 'named-1', 'x-forwarded-for': '203.0.113.9' },
    });
    expect(res.status).toBe(200);
    await expect.poll(() => gateway.logs.some((line) => line.requestId === 'named-1')).toBe(true);
    const line = gateway.logs.find((entry) => entry.requestId === 'named-1')!;
    expect(line).toMatchObject({ path: '/pets/1', client: '127.0.0.1' });
    expect(JSON.stringify(line)).not.toContain('secret-value');
  });

  it('logs the address a trusted proxy forwarded, not one the client wrote before it', async () => {
    const behindProxy = await startTestGateway({
      ...petsConfig(`${upstream.url}/v2/pets`),
      trustProxy: ['127.0.0.1'],
    });
    try {
      await request(behindProxy.url, {
        path: '/pets/1',
        headers: { ...auth, 'x-request-id': 'named-2', 'x-forwarded-for': '192.0.2.1, 203.0.113.9' },
      });
      await expect.poll(() => behindProxy.logs.some((line) => line.requestId === 'named-2')).toBe(true);
      expect(behindProxy.logs.find((line) => line.requestId === 'named-2')).toMatchObject({
        client: '203.0.113.9',
      });
    } finally {
      await behindProxy.close();
    }
  });
});
