import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate, httpsGet, type TestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let certificate: TestCertificate;
let upstream: TestUpstream;
let gateway: TestGateway;

beforeAll(async () => {
  certificate = await createTestCertificate();
  upstream = await startUpstream();
  gateway = await startTestGateway(
    petsConfig(upstream.url, { tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile } }),
  );
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
  rmSync(certificate.dir, { recursive: true, force: true });
});

const httpsGetPet = (path: string) =>
  httpsGet(gateway.running.ports.https, path, {
    ca: certificate.cert,
    headers: { authorization: basicAuth(devKey) },
  });

describe('HTTPS listener', () => {
  it('serves the same routes over TLS and tells the upstream the client used https', async () => {
    const res = await httpsGetPet('/pets/1');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe('/1');
    expect(upstream.requests.at(-1)!.headers['x-forwarded-proto']).toBe('https');
  });

  it('keeps the plain HTTP listener open beside it', async () => {
    expect(gateway.running.ports.https).not.toBe(gateway.running.ports.http);
    const res = await request(gateway.url, {
      path: '/pets/1',
      headers: { authorization: basicAuth(devKey) },
    });
    expect(res.status).toBe(200);
    expect(upstream.requests.at(-1)!.headers['x-forwarded-proto']).toBe('http');
  });
});

describe('port: false', () => {
  it('opens no plain-HTTP listener, and serves over HTTPS alone', async () => {
    const httpsOnly = await startTestGateway(
      petsConfig(upstream.url, {
        port: false,
        APIKeyAuthType: 'apikey',
        tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      }),
    );
    try {
      expect(httpsOnly.running.ports).not.toHaveProperty('http');
      expect(httpsOnly.logs.find((line) => line.msg === 'gateway started')?.ports).toEqual({
        https: httpsOnly.running.ports.https,
        admin: httpsOnly.running.ports.admin,
      });
      const res = await httpsGet(httpsOnly.running.ports.https, '/pets/1', {
        ca: certificate.cert,
        headers: { apikey: devKey },
      });
      expect(res.status).toBe(200);
    } finally {
      await httpsOnly.close();
    }
  });
});
