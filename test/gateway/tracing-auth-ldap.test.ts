import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../helpers/free-port.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { request } from '../helpers/raw-http.js';
import { ldapSettingsOf } from '../helpers/slapd-server.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { spanKind, spanTexts, traceOf } from '../helpers/trace-trees.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const ldap = inject('ldap');
const alice = ldap.users.find((user) => user.uid === 'alice')!;
const bob = ldap.users.find((user) => user.uid === 'bob')!;
const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
const wrongPassword = 'not-alice-password-7f3a';
const directoryPort = Number(new URL(ldap.url).port || 389);

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let gateway: TestGateway;

const tracedGateway = (ldapSettings: Record<string, unknown>) =>
  startTestGateway(
    petsConfig(upstream.url, {
      APIKeyAuthType: 'ldap',
      ldap: ldapSettings,
      tracing: { enabled: true, endpoint: receiver.url, scheduledDelay: 10 },
    }),
  );

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream();
  gateway = await tracedGateway({ ...ldapSettingsOf(ldap), cache: true });
});

afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await receiver?.close();
});

const get = (target: TestGateway, authorization: string) =>
  request(target.url, { path: '/pets/1', headers: { authorization } });

describe('the authentication span of the ldap scheme', () => {
  it('hangs the directory search and binds under authenticate, under the server span, in one trace', async () => {
    expect((await get(gateway, basic('alice', alice.password))).status).toBe(200);
    const trace = await traceOf(gateway, receiver, 200);
    // By name: the upstream's client span, then authenticate, and nothing else under the server span.
    const [upstreamTry, authenticate, ...others] = trace.childrenOf(trace.server);
    expect(upstreamTry).toMatchObject({ name: 'GET', kind: spanKind.client });
    expect(others).toEqual([]);
    expect(authenticate).toMatchObject({
      name: 'quotagate.authenticate',
      kind: spanKind.internal,
      traceId: trace.server.traceId,
      status: { code: 0 },
      attributes: {
        'quotagate.auth.scheme': 'ldap',
        'quotagate.auth.outcome': 'admitted',
        'quotagate.auth.cached': false,
      },
    });
    const directory = trace.childrenOf(authenticate!);
    expect(directory.map((span) => [span.name, span.kind, span.status.code])).toEqual([
      ['ldap bind', spanKind.client, 0],
      ['ldap bind', spanKind.client, 0],
      ['ldap search', spanKind.client, 0],
    ]);
    expect(directory.map((span) => span.attributes['quotagate.ldap.bind'] ?? 'search').sort()).toEqual([
      'search',
      'service',
      'user',
    ]);
    for (const span of directory)
      expect(span.attributes).toMatchObject({
        'server.address': '127.0.0.1',
        'server.port': directoryPort,
        'network.protocol.name': 'ldap',
        'quotagate.ldap.result_code': 0,
      });
  });

  it('has no directory span when the session cache answers', async () => {
    expect((await get(gateway, basic('alice', alice.password))).status).toBe(200);
    const trace = await traceOf(gateway, receiver, 200);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate.attributes).toMatchObject({
      'quotagate.auth.outcome': 'admitted',
      'quotagate.auth.cached': true,
    });
    expect(trace.childrenOf(authenticate)).toEqual([]);
    expect(trace.spans.filter((span) => span.name.startsWith('ldap '))).toEqual([]);
  });

  it('refuses a wrong password with its reason, the failed bind a span of its own, the server span 401', async () => {
    expect((await get(gateway, basic('bob', wrongPassword))).status).toBe(401);
    const trace = await traceOf(gateway, receiver, 401);
    expect(trace.server.attributes).toMatchObject({
      'http.response.status_code': 401,
      'quotagate.decision': 'refused',
      'quotagate.refusal.code': 'unauthorized',
    });
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate.parentSpanId).toBe(trace.server.spanId);
    expect(authenticate.status.code).toBe(0);
    expect(authenticate.attributes).toMatchObject({
      'quotagate.auth.outcome': 'refused',
      'quotagate.auth.refusal': 'bad_password',
      'quotagate.auth.cached': false,
    });
    const userBind = trace
      .childrenOf(authenticate)
      .find((span) => span.attributes['quotagate.ldap.bind'] === 'user')!;
    // 49: invalidCredentials (RFC 4511 section 4.1.9).
    expect(userBind).toMatchObject({
      status: { code: 2 },
      attributes: { 'quotagate.ldap.result_code': 49, 'error.type': 'InvalidCredentialsError' },
    });
  });

  it('refuses a name the directory does not know without binding as anyone but the service', async () => {
    expect((await get(gateway, basic('nobody-here', wrongPassword))).status).toBe(401);
    const trace = await traceOf(gateway, receiver, 401);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate.attributes['quotagate.auth.refusal']).toBe('unknown_user');
    expect(
      trace.childrenOf(authenticate).map((span) => span.attributes['quotagate.ldap.bind'] ?? span.name),
    ).toEqual(['service', 'ldap search']);
  });

  it('refuses a request without credentials with no directory span', async () => {
    expect((await request(gateway.url, { path: '/pets/1' })).status).toBe(401);
    const trace = await traceOf(gateway, receiver, 401);
    const authenticate = trace.one('quotagate.authenticate');
    expect(authenticate.attributes['quotagate.auth.refusal']).toBe('no_credentials');
    expect(trace.childrenOf(authenticate)).toEqual([]);
  });

  it('answers 503 when the directory is down, the authentication and its bind spans failed', async () => {
    const down = await tracedGateway({
      ...ldapSettingsOf(ldap),
      url: `ldap://127.0.0.1:${await freePort()}`,
    });
    try {
      expect((await get(down, basic('alice', alice.password))).status).toBe(503);
      const trace = await traceOf(down, receiver, 503);
      expect(trace.server.status.code).toBe(2);
      const authenticate = trace.one('quotagate.authenticate');
      expect(authenticate).toMatchObject({
        status: { code: 2 },
        attributes: {
          'quotagate.auth.outcome': 'unavailable',
          'error.type': 'service_unavailable',
        },
      });
      const [bind, ...more] = trace.childrenOf(authenticate);
      expect(more).toEqual([]);
      expect(bind).toMatchObject({ name: 'ldap bind', kind: spanKind.client, status: { code: 2 } });
      expect(bind!.attributes['error.type']).toEqual(expect.any(String));
    } finally {
      await down.close();
    }
  });

  it('puts no password, credential or hash of one in any span', () => {
    expect(receiver.spans.length).toBeGreaterThan(0);
    const secrets = [
      alice.password,
      bob.password,
      wrongPassword,
      ldap.adminPassword,
      basic('alice', alice.password).slice('Basic '.length),
      basic('bob', wrongPassword).slice('Basic '.length),
    ];
    for (const text of spanTexts(receiver.spans))
      for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
