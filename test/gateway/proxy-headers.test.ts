import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { auth, useProxyParts } from '../helpers/proxy-parts.js';

const { gatewayFor, upstreamWith } = useProxyParts();

describe('header hygiene', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startUpstream((_req, res) => {
      res.writeHead(200, {
        'content-type': 'text/plain',
        connection: 'x-upstream-secret',
        'x-upstream-secret': 'internal',
        'keep-alive': 'timeout=5',
        'proxy-authenticate': 'Basic',
        trailer: 'x-checksum',
        'x-request-id': 'from-upstream',
        'x-kept': 'yes',
      });
      res.end('ok');
    });
    gateway = await startTestGateway(petsConfig(upstream.url));
  });

  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('strips hop-by-hop request headers, including those named in Connection', async () => {
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        connection: 'keep-alive, x-hop',
        'x-hop': 'drop me',
        'keep-alive': 'timeout=1',
        te: 'deflate',
        'proxy-authorization': 'Basic abc',
        upgrade: 'h2c',
        'x-end-to-end': 'keep me',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    for (const name of ['x-hop', 'keep-alive', 'te', 'proxy-authorization', 'upgrade']) {
      expect(seen[name], name).toBeUndefined();
    }
    expect(seen['x-end-to-end']).toBe('keep me');
  });

  it('strips hop-by-hop response headers, including those named in Connection', async () => {
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.body).toBe('ok');
    expect(res.headers['x-upstream-secret']).toBeUndefined();
    expect(res.headers['proxy-authenticate']).toBeUndefined();
    expect(res.headers.trailer).toBeUndefined();
    expect(res.headers['x-kept']).toBe('yes');
  });

  it('never forwards Authorization or APIKey by default', async () => {
    await request(gateway.url, { path: '/pets/1', headers: { ...auth, apikey: 'some-key' } });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen.authorization).toBeUndefined();
    expect(seen.apikey).toBeUndefined();
  });

  it('replaces client-sent X-Forwarded-* with values from the socket', async () => {
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.test',
        forwarded: 'for=6.6.6.6',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('http');
    expect(seen['x-forwarded-host']).toBe(new URL(gateway.url).host);
    expect(seen.forwarded).toBeUndefined();
    expect(seen.host).toBe(new URL(upstream.url).host);
  });

  it('keeps a valid X-Request-Id, sends it upstream and echoes it over the upstream one', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...auth, 'x-request-id': 'abc-123' },
    });
    expect(res.headers['x-request-id']).toBe('abc-123');
    expect(upstream.requests.at(-1)!.headers['x-request-id']).toBe('abc-123');
  });

  it('replaces an unusable X-Request-Id with a generated one', async () => {
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { ...auth, 'x-request-id': 'not a token' },
    });
    expect(res.headers['x-request-id']).toMatch(/^[A-Za-z0-9_-]{16}-\d+$/);
    expect(upstream.requests.at(-1)!.headers['x-request-id']).toBe(res.headers['x-request-id']);
  });

  it('reuses upstream connections (keep-alive agent)', async () => {
    const before = upstream.requests.length;
    for (let i = 0; i < 3; i += 1) await request(gateway.url, { path: '/pets/1', headers: auth });
    const sockets = new Set(upstream.requests.slice(before).map((seen) => seen.socket));
    expect(sockets.size).toBe(1);
  });
});

describe('forwarding options', () => {
  it('extends X-Forwarded-For from a trusted proxy and keeps its proto and host', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url, { trustProxy: ['127.0.0.0/8'] });
    await request(gateway.url, {
      path: '/pets/1',
      headers: {
        ...auth,
        'x-forwarded-for': '203.0.113.9',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.test',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('https');
    expect(seen['x-forwarded-host']).toBe('api.test');
  });

  it('forwards credentials when forwardCredentials is true', async () => {
    const upstream = await upstreamWith();
    const gateway = await gatewayFor(upstream.url, { forwardCredentials: true });
    await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(upstream.requests.at(-1)!.headers.authorization).toBe(auth.authorization);
  });
});
