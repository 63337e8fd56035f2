import { rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { describe, expect, it } from 'vitest';
import { adminUser, petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import {
  createTestCertificate,
  fingerprintOf,
  servedFingerprint,
  type TestCertificate,
} from '../helpers/tls-cert.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * `admin.tls`: the admin listener over HTTPS, its session cookie `Secure` there (and only there: over
 * plain HTTP a client would never send it back), and its certificate rotated by a reload. Real gateways
 * and real TLS handshakes on 127.0.0.1.
 */
const defer = cleanupAfterEach();

async function certificate(): Promise<TestCertificate> {
  const made = await createTestCertificate();
  defer(() => rmSync(made.dir, { recursive: true, force: true }));
  return made;
}

async function start(extraAdmin: Record<string, unknown>): Promise<TestGateway> {
  const config = petsConfig('http://127.0.0.1:9/pets');
  const gateway = await startTestGateway({
    ...config,
    admin: { ...(config.admin as Record<string, unknown>), ...extraAdmin },
  });
  defer(() => gateway.close());
  return gateway;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
}

/** One request to the admin port over `scheme`, trusting `ca`. */
function request(
  scheme: 'http' | 'https',
  port: number,
  path: string,
  init: { method?: string; body?: string; headers?: http.OutgoingHttpHeaders; ca?: string } = {},
): Promise<Answer> {
  const client = scheme === 'https' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: init.method ?? 'GET',
        headers: init.headers,
        agent: false,
        ...(init.ca ? { ca: init.ca } : {}),
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

const loginForm = {
  method: 'POST',
  body: new URLSearchParams({ username: adminUser.username, password: adminUser.password }).toString(),
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
};

/** The Set-Cookie lines of a login and of the logout that follows it. */
async function sessionCookies(scheme: 'http' | 'https', port: number, ca?: string): Promise<string[]> {
  const login = await request(scheme, port, '/api/portal/v1.3/login', {
    ...loginForm,
    ...(ca ? { ca } : {}),
  });
  expect(login.status).toBe(303);
  const [cookie] = login.headers['set-cookie']!;
  const logout = await request(scheme, port, '/api/portal/v1.3/login', {
    method: 'DELETE',
    headers: { cookie: cookie!.split(';')[0]!, 'csrf-token': String(login.headers['csrf-token']) },
    ...(ca ? { ca } : {}),
  });
  expect(logout.status).toBe(204);
  return [cookie!, logout.headers['set-cookie']![0]!];
}

describe('admin.tls', () => {
  it('serves the admin port over HTTPS, and gives the session cookie Secure there', async () => {
    const cert = await certificate();
    const gateway = await start({ tls: { key: cert.keyFile, cert: cert.certFile } });
    const port = gateway.running.ports.admin;
    expect((await request('https', port, '/healthz', { ca: cert.cert })).status).toBe(200);
    const [opened, ended] = await sessionCookies('https', port, cert.cert);
    expect(opened).toMatch(
      /^APIMANAGERSESSION=[\w-]{40,}; Path=\/api\/portal; HttpOnly; SameSite=Strict; Secure$/,
    );
    expect(ended).toBe('APIMANAGERSESSION=; Path=/api/portal; HttpOnly; SameSite=Strict; Secure; Max-Age=0');
    // Plain HTTP on the HTTPS port gets no answer of the admin API.
    await expect(request('http', port, '/healthz')).rejects.toThrow();
  });

  it('leaves Secure out over plain HTTP, where a client would never send the cookie back', async () => {
    const gateway = await start({});
    const [opened, ended] = await sessionCookies('http', gateway.running.ports.admin);
    expect(opened).toMatch(/^APIMANAGERSESSION=[\w-]{40,}; Path=\/api\/portal; HttpOnly; SameSite=Strict$/);
    expect(ended).toBe('APIMANAGERSESSION=; Path=/api/portal; HttpOnly; SameSite=Strict; Max-Age=0');
  });

  it('serves a certificate a reload rotated to new connections; turning TLS on or off waits for a restart', async () => {
    const [first, second] = [await certificate(), await certificate()];
    const config = petsConfig('http://127.0.0.1:9/pets');
    const adminOf = (tlsFiles?: TestCertificate) => ({
      ...(config.admin as Record<string, unknown>),
      ...(tlsFiles ? { tls: { key: tlsFiles.keyFile, cert: tlsFiles.certFile } } : {}),
    });
    const gateway = await startTestGateway({ ...config, admin: adminOf(first) });
    defer(() => gateway.close());
    const served = () => servedFingerprint(gateway.running.ports.admin);
    expect(await served()).toBe(fingerprintOf(first.cert));
    expect(await gateway.reloadWith({ ...config, admin: adminOf(second) })).toEqual({
      applied: true,
      kept: [],
    });
    expect(await served()).toBe(fingerprintOf(second.cert));
    expect(await gateway.reloadWith({ ...config, admin: adminOf() })).toEqual({
      applied: true,
      kept: ['admin.tls'],
    });
    expect(await served()).toBe(fingerprintOf(second.cert));
  });

  it('refuses an admin.tls without its certificate, naming the key', async () => {
    const config = petsConfig('http://127.0.0.1:9/pets');
    await expect(
      startTestGateway({
        ...config,
        admin: { ...(config.admin as Record<string, unknown>), tls: { key: 'key.pem' } },
      }),
    ).rejects.toThrow(/admin\.tls\.cert/);
  });
});
