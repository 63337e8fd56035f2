import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import {
  adminUser,
  devKey,
  memberUser,
  petsConfig,
  setQuota,
  startGatewayOverUpstream,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
  accessLines,
} from '../helpers/test-gateway.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { startUpstream } from '../helpers/upstream.js';
import { ldapSettingsOf } from '../helpers/slapd-server.js';
import { startTestIdentityProvider } from '../helpers/jwks-server.js';

/**
 * "Try it" of the console's API documentation tab: the gateway sends a request through its own data
 * plane with the scheme's credentials added on the server (the project key, or the plugin's
 * applyCredentialsForTest), passes the answer through the plugin's applyResponseForTest, and never shows
 * the credentials it added. A real gateway over a real upstream that echoes what it receives.
 */
const secret = 'a-long-shared-secret-0123456789';

const ldap = inject('ldap');
const defer = cleanupAfterEach();

async function start(extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const started = await startGatewayOverUpstream((url) => petsConfig(`${url}/pets`, extra));
  defer(() => started.close());
  return started.gateway;
}

async function tryIt(
  gateway: TestGateway,
  body: Record<string, unknown>,
  user: { username: string; password: string } = adminUser,
): Promise<{ status: number; text: string; json: Record<string, unknown> }> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/console/try`, {
    method: 'POST',
    headers: { authorization: userAuth(user), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Record<string, unknown> };
}

describe('try it', () => {
  it('sends the request with the project key through the data plane, and never shows the key', async () => {
    const gateway = await start();
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(100, 1, 'hour')] },
      systemQuotaId,
    );
    const answer = await tryIt(gateway, {
      method: 'GET',
      path: '/pets/1?x=1',
      headers: { 'x-trace': 'console' },
    });
    expect(answer.status).toBe(200);
    expect(answer.json.status).toBe(200);
    const echoed = answer.json.body as { url: string; headers: Record<string, string> };
    expect(echoed.url).toBe('/pets/1?x=1');
    expect(echoed.headers['x-trace']).toBe('console');
    // The upstream saw no credential (the gateway keeps Authorization); the answer holds none either.
    expect(answer.text).not.toContain(devKey);
    expect(answer.text).not.toContain(Buffer.from(`${devKey}:`).toString('base64'));
    expect((answer.json.headers as Record<string, string>)['ratelimit']).toMatch(/;r=99;/);
    // Through the data plane: counted like any request, and logged.
    expect(accessLines(gateway).at(-1)).toMatchObject({
      path: '/pets/1',
      status: 200,
    });
  });

  it('goes over HTTPS when the data plane has no plain-HTTP port (port: false)', async () => {
    const certificate = await createTestCertificate();
    defer(() => rmSync(certificate.dir, { recursive: true, force: true }));
    const gateway = await start({
      port: false,
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
    });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
    expect(answer.json.status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({ path: '/pets/1', status: 200 });
  });

  it("adds the plugin's credentials (applyCredentialsForTest): the request passes, and the secret is not shown", async () => {
    const gateway = await start({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './examples/plugins/x-secret.js',
      secret,
    });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
    expect(answer.json.status).toBe(200);
    expect(answer.text).not.toContain(secret);
    expect(answer.text).toContain('[REDACTED]');
  });

  it('passes the answer through the plugin’s applyRequestsForTest', async () => {
    const gateway = await start({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './test/fixtures/plugins/response-adjusting-plugin.js',
      secret,
    });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/2' });
    expect(answer.json.status).toBe(200);
    expect(answer.json.body).toMatchObject({
      adjustedBy: 'plugin',
      status: 200,
      original: { url: '/pets/2' },
    });
    expect(answer.text).not.toContain(secret);
  });

  it('never shows a credential the plugin put in the URL, and sends a header value it gave as a number', async () => {
    const keySecret = 'query-secret-0123456789abcdef';
    const gateway = await start({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './test/fixtures/plugins/query-key-plugin.js',
      secret: keySecret,
    });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1?x=1' });
    expect(answer.status).toBe(200);
    expect(answer.json.status).toBe(200);
    const echoed = answer.json.body as { url: string; headers: Record<string, string> };
    expect(echoed.headers['x-team-id']).toBe('42');
    expect(echoed.url).toBe('/pets/1?x=1&key=[REDACTED]');
    expect(answer.text).not.toContain(keySecret);
  });

  it('never shows a secret however the upstream spells it: JSON-escaped, percent-encoded, base64', async () => {
    const awkward = 'pa"ss\\word+/=0123456789';
    const upstream = await startUpstream((_req, res, seen) => {
      const pass = String(seen.headers['x-team-pass'] ?? '');
      res.writeHead(200, { 'content-type': 'application/json', 'x-seen-pass': encodeURIComponent(pass) });
      res.end(
        JSON.stringify({
          pass,
          base64: Buffer.from(pass).toString('base64'),
          urlEncoded: encodeURIComponent(pass),
        }),
      );
    });
    defer(() => upstream.close());
    const gateway = await startTestGateway(
      petsConfig(`${upstream.url}/pets`, {
        APIKeyAuthType: 'plugin',
        APIKeyAuthPlugin: './test/fixtures/plugins/response-adjusting-plugin.js',
        secret: awkward,
      }),
    );
    defer(() => gateway.close());
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
    expect(answer.json.status).toBe(200);
    expect(JSON.stringify(answer.json.body)).toContain('[REDACTED]');
    for (const spelling of [
      awkward,
      JSON.stringify(awkward).slice(1, -1),
      encodeURIComponent(awkward),
      Buffer.from(awkward).toString('base64'),
    ])
      expect(answer.text).not.toContain(spelling);
  });

  it('sends the request as the directory user entered with ldap, and never shows their password', async () => {
    const gateway = await start({
      APIKeyAuthType: 'ldap',
      ldap: ldapSettingsOf(ldap),
    });
    const alice = ldap.users.find((user) => user.uid === 'alice')!;
    expect((await tryIt(gateway, { method: 'GET', path: '/pets/1' })).text).toContain(
      'user: is required with the ldap scheme (a directory user)',
    );
    const answer = await tryIt(gateway, {
      method: 'GET',
      path: '/pets/1',
      user: { username: 'alice', password: alice.password },
    });
    expect(answer.json.status).toBe(200);
    expect(answer.text).not.toContain(alice.password);
    const wrong = await tryIt(gateway, {
      method: 'GET',
      path: '/pets/1',
      user: { username: 'alice', password: 'not-her-password' },
    });
    expect(wrong.json.status).toBe(401);
    expect(wrong.text).not.toContain('not-her-password');
  });

  it('is for administrators, takes no credentials from the browser, and goes nowhere but the data plane', async () => {
    const gateway = await start();
    expect((await tryIt(gateway, { method: 'GET', path: '/pets/1' }, memberUser)).status).toBe(403);
    const withKey = await tryIt(gateway, {
      method: 'GET',
      path: '/pets/1',
      headers: { Authorization: 'Basic x' },
    });
    expect(withKey.status).toBe(400);
    for (const path of ['//evil.example/x', 'http://evil.example/x', 'pets/1']) {
      const refused = await tryIt(gateway, { method: 'GET', path });
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.json)).toContain("must be a path of the gateway, starting with one '/'");
    }
  });
});

describe('try it with the jwt scheme', () => {
  /** A gateway of the jwt scheme over an identity provider of the test's, and a token it signed. */
  async function startJwt(extra: Record<string, unknown> = {}) {
    const idp = await startTestIdentityProvider(defer);
    const gateway = await start({ APIKeyAuthType: 'jwt', jwt: idp.jwt, ...extra });
    return { gateway, idp, token: await idp.token() };
  }

  it('sends the request with the bearer token entered, and never shows, logs or stores it', async () => {
    const { gateway, token } = await startJwt();
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1', token });
    expect(answer.json.status).toBe(200);
    expect(accessLines(gateway).at(-1)).toMatchObject({ path: '/pets/1', status: 200, application: 'app-a' });
    expect(answer.text).not.toContain(token);
    expect(gateway.rawLogs()).not.toContain(token);
    expect(
      readdirSync(gateway.configDir)
        .map((file) => readFileSync(path.join(gateway.configDir, file), 'utf8'))
        .join(''),
    ).not.toContain(token);
  });

  it('says a token is needed, and shows the refusal of a bad one without the token', async () => {
    const { gateway, idp } = await startJwt();
    const without = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
    expect(without.status).toBe(400);
    expect(without.text).toContain(
      'token: is required with the jwt scheme (a bearer token from the identity provider)',
    );
    const expired = await idp.token({ exp: Math.floor(Date.now() / 1000) - 60 });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1', token: expired });
    expect(answer.json.status).toBe(401);
    expect((answer.json.headers as Record<string, string>)['www-authenticate']).toContain(
      'error_description="the token has expired"',
    );
    expect(answer.text).not.toContain(expired);
  });

  it('never shows the token when the upstream echoes it back (forwardCredentials: true)', async () => {
    const { gateway, token } = await startJwt({ forwardCredentials: true });
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1', token });
    expect(answer.json.status).toBe(200);
    // The echoing upstream received it, and the answer shows it hidden.
    expect((answer.json.body as { headers: Record<string, string> }).headers.authorization).toBe(
      '[REDACTED]',
    );
    expect(answer.text).not.toContain(token);
  });

  it('refuses a token that would split the request, before sending anything', async () => {
    const { gateway, token } = await startJwt();
    for (const bad of [`${token}\r\nX-Injected: 1`, `${token} other`, '']) {
      const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1', token: bad });
      expect(answer.status).toBe(400);
    }
    expect(accessLines(gateway)).toEqual([]);
  });
});

describe('try it, attacked', () => {
  /** A server on 127.0.0.1 that nothing of "try it" may reach. */
  async function elsewhere() {
    const server = await startUpstream();
    defer(() => server.close());
    return server;
  }

  it('reaches the data plane whatever the path spells: no @, backslash, tab or encoded slash leads elsewhere', async () => {
    const other = await elsewhere();
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    defer(() => gateway.close());
    const otherHost = new URL(other.url).host;
    for (const path of [
      `/@${otherHost}/pets/1`,
      `/\\${otherHost}/pets/1`,
      `/\t/${otherHost}/pets/1`,
      `/%2F%2F${otherHost}/pets/1`,
      `/pets/1\r\nHost: ${otherHost}`,
    ]) {
      const answer = await tryIt(gateway, { method: 'GET', path });
      // The data plane's own answer, whatever it is (it refuses an encoded slash): it was the one asked.
      expect(answer.status, path).toBe(200);
      expect(answer.json.status, path).toEqual(expect.any(Number));
    }
    expect(other.requests).toHaveLength(0);
  });

  it('refuses header fields that would split the request, and methods outside the form, before sending anything', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
    defer(() => gateway.close());
    for (const headers of [
      { 'x-note': 'a\r\nAuthorization: Basic Zm9vOg==' },
      { 'x-note\r\nAuthorization': 'Basic Zm9vOg==' },
      { 'x note': 'a' },
      { 'Proxy-Authorization': 'Basic Zm9vOg==' },
      { COOKIE: 'a=b' },
    ]) {
      const refused = await tryIt(gateway, { method: 'GET', path: '/pets/1', headers });
      expect(refused.status, JSON.stringify(headers)).toBe(400);
    }
    for (const method of ['TRACE', 'CONNECT', 'get', 'PROPFIND']) {
      expect((await tryIt(gateway, { method, path: '/pets/1' })).status, method).toBe(400);
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it("refuses a plugin's test request pointed anywhere but the data plane: another port, another name", async () => {
    const other = await elsewhere();
    const otherPort = new URL(other.url).port;
    for (const target of [
      `http://127.0.0.1:${otherPort}{path}`,
      `http://127.0.0.1:{port}@127.0.0.1:${otherPort}{path}`,
      'http://localhost:{port}{path}',
      'http://[::ffff:127.0.0.1]:{port}{path}',
      'https://127.0.0.1:{port}{path}',
    ]) {
      const gateway = await start({
        APIKeyAuthType: 'plugin',
        APIKeyAuthPlugin: './test/fixtures/plugins/redirecting-plugin.js',
        secret,
        testTarget: target,
      });
      const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
      expect(answer.status, target).toBe(400);
      expect(answer.text).toContain("the request must go to this gateway's data plane");
      expect(answer.text).not.toContain(secret);
    }
    expect(other.requests).toHaveLength(0);
  });
});

describe('try it against an upstream that answers with a redirect', () => {
  it('never follows it, so the credentials it added go nowhere else, and shows none of them in the Location', async () => {
    const elsewhere = await startUpstream();
    defer(() => elsewhere.close());
    const upstream = await startUpstream((_req, res, seen) => {
      const authorization = String(seen.headers.authorization ?? '');
      res.writeHead(302, {
        location: `${elsewhere.url}/steal?auth=${encodeURIComponent(authorization)}`,
        'x-echo': authorization,
      });
      res.end(authorization);
    });
    defer(() => upstream.close());
    const gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`, { forwardCredentials: true }));
    defer(() => gateway.close());
    const answer = await tryIt(gateway, { method: 'GET', path: '/pets/1' });
    expect(answer.json.status).toBe(302);
    expect(upstream.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
    const basic = Buffer.from(`${devKey}:`).toString('base64');
    for (const spelling of [devKey, basic, encodeURIComponent(`Basic ${basic}`)])
      expect(answer.text).not.toContain(spelling);
  });
});
