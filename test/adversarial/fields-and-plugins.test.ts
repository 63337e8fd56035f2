import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  petsConfig,
  setQuota,
  startGatewayOverUpstream,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
  throttle,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * Header fields a client who read the README would try, and what an auth plugin is shown: nothing may
 * make the upstream run another operation than the one routed, authenticated and counted, or believe the
 * client is someone it is not.
 */

const auth = { authorization: basicAuth(devKey) };

let upstream: TestUpstream;
let gateway: TestGateway;
let host: string;
let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream();
  ({ upstream, gateway, host } = setup);
});

afterAll(() => setup.close());

const clientFields = {
  'x-real-ip': '6.6.6.6',
  'true-client-ip': '6.6.6.6',
  'x-client-ip': '6.6.6.6',
  'cf-connecting-ip': '6.6.6.6',
  'x-cluster-client-ip': '6.6.6.6',
  'x-forwarded-port': '443',
  'x-forwarded-prefix': '/admin',
  'x-original-host': 'evil.test',
  forwarded: 'for=6.6.6.6;proto=https',
};

describe('fields that claim who the client is', () => {
  it('drops them when the peer is not trusted', async () => {
    await request(gateway.url, { path: '/pets/1', headers: { ...auth, ...clientFields } });
    const seen = upstream.requests.at(-1)!.headers;
    for (const name of Object.keys(clientFields)) expect(seen[name], name).toBeUndefined();
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('keeps them from a trusted peer', async () => {
    const trusting = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, { trustProxy: ['127.0.0.1'] }),
    );
    try {
      await request(trusting.url, { path: '/pets/1', headers: { ...auth, ...clientFields } });
      const seen = upstream.requests.at(-1)!.headers;
      for (const [name, value] of Object.entries(clientFields)) expect(seen[name], name).toBe(value);
    } finally {
      await trusting.close();
    }
  });
});

describe('fields that would change what the upstream runs', () => {
  it.each([
    ['x-original-url', '/pets/findByStatus'],
    ['x-rewrite-url', '/admin'],
    ['x-http-method-override', 'DELETE'],
    ['x-http-method', 'DELETE'],
    ['x-method-override', 'DELETE'],
    ['X-HTTP-Method-Override', 'delete'],
  ])('answers 400 to a request with %s and sends nothing upstream', async (name, value) => {
    const before = upstream.requests.length;
    const res = await request(gateway.url, { path: '/pets/1', headers: { ...auth, [name]: value } });
    expect(res.status).toBe(400);
    expect(upstream.requests.length).toBe(before);
  });

  it('answers 400 to two Host lines, whichever comes first', async () => {
    for (const hosts of [
      [host, 'evil.test'],
      ['evil.test', host],
    ]) {
      const response = await rawExchange(
        gateway.url,
        `GET /pets/1 HTTP/1.1\r\nHost: ${hosts[0]}\r\nHost: ${hosts[1]}\r\nAuthorization: ${auth.authorization}\r\nConnection: close\r\n\r\n`,
      );
      expect(response).toMatch(/^HTTP\/1\.1 400 /);
    }
  });

  it('answers 400 to Transfer-Encoding on HTTP/1.0, whose framing is faulty (RFC 9112 §6.1)', async () => {
    const before = upstream.requests.length;
    const response = await rawExchange(
      gateway.url,
      `POST /pets HTTP/1.0\r\nHost: ${host}\r\nAuthorization: ${auth.authorization}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
    );
    expect(response).toMatch(/^HTTP\/1\.1 400 /);
    expect(upstream.requests.length).toBe(before);
  });
});

describe('two credentials', () => {
  it('refuses two Authorization lines even when the first is valid', async () => {
    for (const second of [basicAuth(devKey), basicAuth('another-key-0123456789abcdef'), 'Bearer x']) {
      const response = await rawExchange(
        gateway.url,
        `GET /pets/1 HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${auth.authorization}\r\nAuthorization: ${second}\r\nConnection: close\r\n\r\n`,
      );
      expect(response).toMatch(/^HTTP\/1\.1 401 /);
    }
  });
});

/** Sends the head of a request that waits for 100 Continue; resolves with what the gateway answers first. */
function headExpectingContinue(
  path: string,
  fields: string[],
  body: string,
): Promise<{ first: string; all: () => Promise<string> }> {
  const url = new URL(gateway.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let received = '';
    let answered = false;
    const closed = new Promise<string>((done) => socket.on('close', () => done(received)));
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (answered) return;
      answered = true;
      // What a client does on 100: send the body; on a final answer: stop.
      if (received.startsWith('HTTP/1.1 100 ')) socket.write(body);
      resolve({ first: received, all: () => closed });
    });
    socket.write(
      [
        `POST ${path} HTTP/1.1`,
        `Host: ${url.host}`,
        'Expect: 100-continue',
        `Content-Length: ${Buffer.byteLength(body)}`,
        'Connection: close',
        ...fields,
        '',
        '',
      ].join('\r\n'),
    );
  });
}

describe('Expect: 100-continue', () => {
  it('answers 401 without inviting the body first, and closes the connection', async () => {
    const before = upstream.requests.length;
    const { first } = await headExpectingContinue('/pets', [], '{"name":"rex"}');
    expect(first).toMatch(/^HTTP\/1\.1 401 /);
    expect(first.toLowerCase()).toContain('connection: close');
    expect(upstream.requests.length).toBe(before);
  });

  it('invites the body once the request is authenticated and admitted, and forwards it', async () => {
    const { first, all } = await headExpectingContinue(
      '/pets',
      [`Authorization: ${auth.authorization}`],
      '{"name":"rex"}',
    );
    expect(first).toMatch(/^HTTP\/1\.1 100 Continue/);
    expect(await all()).toMatch(/HTTP\/1\.1 200 OK/);
    expect(upstream.requests.at(-1)).toMatchObject({ method: 'POST', body: '{"name":"rex"}' });
    expect(upstream.requests.at(-1)!.headers.expect).toBeUndefined();
  });

  it('answers 429 without inviting the body when the quota is spent', async () => {
    const limited = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    try {
      await setQuota(
        limited,
        {
          type: 'API',
          name: 'System',
          restrictions: [throttle(1, 1, 'minute')],
        },
        systemQuotaId,
      );
      expect((await request(limited.url, { path: '/pets/1', headers: auth })).status).toBe(200);
      const url = new URL(limited.url);
      const socket = net.connect(Number(url.port), url.hostname);
      const first = await new Promise<string>((resolve) => {
        socket.once('data', (chunk) => resolve(chunk.toString('latin1')));
        socket.write(
          `POST /pets HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: ${auth.authorization}\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n`,
        );
      });
      socket.destroy();
      expect(first).toMatch(/^HTTP\/1\.1 429 /);
    } finally {
      await limited.close();
    }
  });
});

describe('what an auth plugin is shown', () => {
  let pluginGateway: TestGateway;
  const seen = () => (globalThis as { quotagateSeenUrls?: string[] }).quotagateSeenUrls ?? [];

  beforeAll(async () => {
    const config = petsConfig(`${upstream.url}/pets`, {
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './test/fixtures/plugins/recording-plugin.js',
    });
    const [api] = config.apis as Array<{ methods: Array<Record<string, string>> }>;
    api!.methods.push({
      id: '5c8d1e4f-3a6b-4c7d-8e9f-2a3b4c5d6e7f',
      name: 'publicFile',
      verb: 'GET',
      path: '/public/{file}',
    });
    pluginGateway = await startTestGateway(config);
  });

  afterAll(() => pluginGateway.close());

  it.each([
    ['/pets/public/../1', '/pets/1'],
    ['/pets/public/%2e%2e/1', '/pets/1'],
    ['http://HOST/pets/1', '/pets/1'],
    ['//pets//1?x=1', '/pets/1?x=1'],
    ['/PETS/FINDBYSTATUS', '/pets/findByStatus'],
  ])(
    'shows matchURL %s as the routed path %s, so an exemption cannot be spelled around',
    async (target, path) => {
      const res = await request(pluginGateway.url, {
        path: target.replace('HOST', new URL(pluginGateway.url).host),
      });
      expect(res.status).toBe(401);
      expect(seen().at(-1)).toBe(path);
    },
  );

  it.each([
    ['/pets/public/../../_quotagate/usage', '/_quotagate/usage'],
    ['/pets/public/%2e%2e/%2E%2E/_quotagate/usage', '/_quotagate/usage'],
    ['/pets/public/./../.././_quotagate/usage/', '/_quotagate/usage'],
    ['//pets/public//..//..//_quotagate//usage?x=1', '/_quotagate/usage?x=1'],
    ['/pets/public/../../%5Fquotagate/usage', '/_quotagate/usage'],
    ['http://HOST/pets/public/../../_quotagate/usage', '/_quotagate/usage'],
  ])(
    'shows matchURL the usage path spelt %s as %s, so an exemption cannot be spelled onto it',
    async (target, path) => {
      const res = await request(pluginGateway.url, {
        path: target.replace('HOST', new URL(pluginGateway.url).host),
      });
      expect(res.status).toBe(401);
      expect(res.body).not.toContain('restrictions');
      expect(seen().at(-1)).toBe(path);
    },
  );

  it('answers 400 to the usage path spelt with a backslash, and shows the plugin nothing', async () => {
    const before = seen().length;
    const res = await request(pluginGateway.url, { path: '/pets/public/..\\..\\_quotagate/usage' });
    expect(res.status).toBe(400);
    expect(seen()).toHaveLength(before);
  });

  it('passes a public path in any spelling, since the plugin sees it in the catalog spelling', async () => {
    for (const target of ['/pets/public/logo.png', '/PETS/Public/logo.png', '/pets/./public/logo.png']) {
      const res = await request(pluginGateway.url, { path: target });
      expect(res.status, target).toBe(200);
      expect(seen().at(-1)).toBe('/pets/public/logo.png');
      expect(upstream.requests.at(-1)!.url).toBe('/pets/public/logo.png');
    }
  });
});
