import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { freePort } from '../helpers/free-port.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { rawExchange } from '../helpers/raw-http.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import {
  accessLines,
  basicAuth,
  devKey,
  petsConfig,
  setQuota,
  startTestGateway,
  systemQuotaId,
  throttle,
  withMethods,
  type TestGateway,
} from '../helpers/test-gateway.js';
import {
  closed,
  echo,
  handshake,
  mustOpen,
  mustRefuse,
  startWebSocketUpstream,
  wsUrl,
} from '../helpers/websockets.js';
import { useSuiteUpstream } from '../helpers/suite-upstream.js';

const defer = cleanupAfterEach();
const upstream = useSuiteUpstream(() => startWebSocketUpstream());

const withKey = { authorization: basicAuth(devKey) };

async function gatewayWith(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const gateway = await startTestGateway(petsConfig(upstream().url, overrides));
  defer(() => gateway.close());
  return gateway;
}

describe('WebSocket through the gateway', () => {
  it('opens a WebSocket on a declared GET and relays messages both ways', async () => {
    const gateway = await gatewayWith();
    const { ws, headers } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(headers['x-request-id']).toMatch(/\S/);
    expect(await echo(ws, 'hello')).toBe('hello');
    expect(await echo(ws, 'again')).toBe('again');
    ws.close(1000, 'done');
    expect(await closed(ws)).toEqual({ code: 1000, reason: 'done' });
  });

  it('opens a WebSocket over TLS (wss) on the HTTPS listener', async () => {
    const certificate = await createTestCertificate();
    const gateway = await gatewayWith({
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
    });
    const url = `wss://127.0.0.1:${gateway.running.ports.https}/pets/1`;
    const { ws } = await mustOpen(url, withKey, { ca: certificate.cert });
    expect(await echo(ws, 'over tls')).toBe('over tls');
    expect(upstream().upgrades.at(-1)!.headers['x-forwarded-proto']).toBe('https');
    ws.close();
  });

  it('leaves the subprotocol to the client and the upstream (RFC 6455 §4.2.2)', async () => {
    const gateway = await gatewayWith();
    const ws = new WebSocket(wsUrl(gateway.url, '/pets/1'), ['chat', 'superchat'], { headers: withKey });
    await once(ws, 'open');
    expect(ws.protocol).toBe('chat');
    expect(upstream().upgrades.at(-1)!.headers['sec-websocket-protocol']).toBe('chat,superchat');
    ws.close();
  });

  it('relays compressed frames the client and the upstream agreed on, counting their bytes as sent', async () => {
    const compressing = await startWebSocketUpstream({ perMessageDeflate: true });
    defer(() => compressing.close());
    const gateway = await startTestGateway(petsConfig(compressing.url));
    defer(() => gateway.close());
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(ws.extensions).toContain('permessage-deflate');
    const text = 'compressible '.repeat(1_000);
    expect(await echo(ws, text)).toBe(text);
    ws.close();
    await closed(ws);
    await expect.poll(() => accessLines(gateway).at(-1)).toMatchObject({ status: 101 });
    // 13,000 characters each way, counted as the few hundred bytes that crossed.
    expect(accessLines(gateway).at(-1)!.bytesOut).toBeLessThan(1_000);
  });

  it("relays the upstream's close code and reason to the client", async () => {
    const gateway = await gatewayWith();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(await echo(ws, 'ping')).toBe('ping');
    const ended = closed(ws);
    upstream().sockets.at(-1)!.close(4000, 'upstream done');
    expect(await ended).toEqual({ code: 4000, reason: 'upstream done' });
    await expect
      .poll(() => accessLines(gateway).at(-1))
      .toMatchObject({ status: 101, webSocket: 'closed', outcome: 'completed' });
  });

  it('sends the upstream the prepared request: routed path, its Host, forwarded fields, request id, no credentials', async () => {
    const gateway = await gatewayWith();
    const { ws, headers } = await mustOpen(wsUrl(gateway.url, '/pets/7?x=1'), {
      ...withKey,
      'x-forwarded-for': '203.0.113.9',
    });
    ws.close();
    const seen = upstream().upgrades.at(-1)!;
    // The API's upstream has no path: the routed path goes without the base path, as for HTTP.
    expect(seen.url).toBe('/7?x=1');
    expect(seen.headers.host).toBe(new URL(upstream().url).host);
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers['x-request-id']).toBe(headers['x-request-id']);
    expect(seen.headers.upgrade).toBe('websocket');
    expect(seen.headers['sec-websocket-version']).toBe('13');
  });

  it('refuses an upgrade without credentials with 401 before any 101', async () => {
    const gateway = await gatewayWith();
    const before = upstream().upgrades.length;
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'));
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toMatch(/^Basic/);
    expect(JSON.parse(refused.body)).toMatchObject({ id: 'com.vendor.api.unauthorized' });
    expect(upstream().upgrades.length).toBe(before);
  });

  it('refuses an upgrade of an undeclared path with 404', async () => {
    const gateway = await gatewayWith();
    expect((await mustRefuse(wsUrl(gateway.url, '/pets/1/toys'), withKey)).status).toBe(404);
  });

  it('refuses an upgrade of a path declared with another verb only with 405 and Allow', async () => {
    const gateway = await startTestGateway(
      withMethods(petsConfig(upstream().url), [
        { id: '7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f', name: 'putPhoto', verb: 'PUT', path: '/{petId}/photo' },
      ]),
    );
    defer(() => gateway.close());
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1/photo'), withKey);
    expect(refused.status).toBe(405);
    expect(refused.headers.allow).toBe('PUT');
  });

  it('refuses an upgrade with 503 when the authenticator cannot decide', async () => {
    const gateway = await gatewayWith({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './test/fixtures/plugins/silent-plugin.js',
      pluginTimeout: 200,
    });
    const before = upstream().upgrades.length;
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ id: 'com.vendor.api.service_unavailable' });
    expect(upstream().upgrades.length).toBe(before);
  });

  it('refuses an upgrade with 400 on an API with `websocket: false`', async () => {
    const gateway = await gatewayWith();
    const config = petsConfig(upstream().url);
    const [api] = config.apis as Array<Record<string, unknown>>;
    const closedApi = await gatewayWith({ apis: [{ ...api, websocket: false }] });
    const refused = await mustRefuse(wsUrl(closedApi.url, '/pets/1'), withKey);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body).message).toBe('Bad Request: this API takes no WebSocket upgrades');
    // The same path of an API that takes them opens.
    (await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey)).ws.close();
  });

  it('counts an upgrade as one throttle unit and refuses the next with 429, RateLimit and Retry-After', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'minute')] },
      systemQuotaId,
    );
    const first = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(first.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=1;t=\\d+$`));
    // Messages on an open WebSocket are not requests: they spend no throttle unit.
    for (let i = 0; i < 5; i += 1) expect(await echo(first.ws, `m${i}`)).toBe(`m${i}`);
    (await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey)).ws.close();
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(refused.headers.ratelimit).toMatch(new RegExp(`^"${systemQuotaId}/0";r=0;t=\\d+$`));
    first.ws.close();
  });

  it('relays the answer of an upstream that refuses the upgrade, then closes the connection', async () => {
    const gateway = await gatewayWith({
      apis: [
        {
          ...(petsConfig(upstream().url).apis as Array<Record<string, unknown>>)[0],
          passUndeclared: true,
        },
      ],
    });
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/refused'), withKey);
    expect(refused.status).toBe(403);
    expect(refused.body).toBe('refused');
    expect(refused.headers['x-request-id']).toMatch(/\S/);
    expect(refused.headers.connection).toBe('close');
  });

  it('writes the access line when the WebSocket closes, with status 101 and the frame bytes each way', async () => {
    const gateway = await gatewayWith();
    const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/1'), withKey);
    await echo(ws, 'x'.repeat(100));
    expect(accessLines(gateway)).toHaveLength(0);
    ws.close();
    await closed(ws);
    await expect.poll(() => accessLines(gateway)).toHaveLength(1);
    const [line] = accessLines(gateway);
    expect(line).toMatchObject({ status: 101, verb: 'GET', path: '/pets/1', webSocket: 'closed' });
    // 100 bytes of payload, a 2-byte head, and the client's 4-byte mask; the close frames besides.
    expect(line!.bytesIn).toBeGreaterThanOrEqual(106);
    expect(line!.bytesOut).toBeGreaterThanOrEqual(102);
    expect(line!.outcome).toBe('completed');
    // The metrics count it as one request of status 101, timed until its 101, not until its close.
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/quotagate_requests_total\{[^}]*status="101"[^}]*\} 1\n/);
    const timed = /quotagate_request_duration_seconds_sum\{api="Pet Store"\} (\S+)/.exec(metrics)?.[1];
    expect(Number(timed)).toBeLessThan(Number(line!.ms) / 1000);
  });
});

describe('an upgrade the upstream cannot take', () => {
  it('answers 502 before any 101 when the upstream is unreachable', async () => {
    const gateway = await startTestGateway(petsConfig(`http://127.0.0.1:${await freePort()}`));
    defer(() => gateway.close());
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(refused.status).toBe(502);
    expect(JSON.parse(refused.body)).toMatchObject({ id: 'com.vendor.api.bad_gateway' });
    await expect
      .poll(() => accessLines(gateway).at(-1))
      .toMatchObject({ status: 502, outcome: 'unreachable' });
  });

  it('answers 504 before any 101 when the upstream does not answer the upgrade within proxyTimeout', async () => {
    const silent = net.createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    defer(
      () =>
        new Promise<void>((resolve) => {
          silent.close(() => resolve());
        }),
    );
    const { port } = silent.address() as AddressInfo;
    const gateway = await startTestGateway(petsConfig(`http://127.0.0.1:${port}`, { proxyTimeout: 200 }));
    defer(() => gateway.close());
    const refused = await mustRefuse(wsUrl(gateway.url, '/pets/1'), withKey);
    expect(refused.status).toBe(504);
    await expect.poll(() => accessLines(gateway).at(-1)).toMatchObject({ status: 504, outcome: 'timeout' });
  });

  it('answers an upgrade to another protocol (h2c) as a plain request, then closes the connection', async () => {
    const gateway = await gatewayWith();
    const answer = await rawExchange(
      gateway.url,
      handshake('/pets/1', [`Authorization: ${withKey.authorization}`]).replace(
        'Upgrade: websocket',
        'Upgrade: h2c',
      ),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
    expect(answer).toMatch(/plain$/);
    expect(upstream().plain.at(-1)!.headers.upgrade).toBeUndefined();
  });

  it('authenticates and counts an upgrade to another protocol as any request: the upgrade is no way around them', async () => {
    const gateway = await gatewayWith();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(1, 1, 'hour')] },
      systemQuotaId,
    );
    const upgrade = (protocol: string, fields: string[]) =>
      rawExchange(
        gateway.url,
        handshake('/pets/1', fields).replace('Upgrade: websocket', `Upgrade: ${protocol}`),
      );
    const seen = upstream().plain.length;
    expect(await upgrade('h2c', [])).toMatch(/^HTTP\/1\.1 401 /);
    expect(await upgrade('foo/1', [])).toMatch(/^HTTP\/1\.1 401 /);
    expect(await upgrade('h2c', [`Authorization: ${withKey.authorization}`])).toMatch(/^HTTP\/1\.1 200 /);
    expect(await upgrade('foo/1', [`Authorization: ${withKey.authorization}`])).toMatch(/^HTTP\/1\.1 429 /);
    expect(upstream().plain.length - seen).toBe(1);
    await expect
      .poll(() => accessLines(gateway).map((line) => line.status))
      .toEqual(expect.arrayContaining([401, 401, 200, 429]));
  });
});
