import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { request } from '../helpers/raw-http.js';
import { petsConfig, accessLines } from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { startUpstream } from '../helpers/upstream.js';
import { auth, nextTick, useProxyParts } from '../helpers/proxy-parts.js';

const { defer, gatewayFor, upstreamWith } = useProxyParts();

describe('upstream failures', () => {
  it('answers 502 JSON within a second when the upstream refuses connections', async () => {
    const closed = await startUpstream();
    await closed.close();
    const gateway = await gatewayFor(closed.url);
    const started = Date.now();
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(502);
    expect(JSON.parse(res.body)).toEqual({
      id: 'com.vendor.api.bad_gateway',
      message: 'Bad Gateway',
      success: false,
    });
    expect(res.body).not.toContain('127.0.0.1');
    expect(res.body).not.toContain('ECONNREFUSED');
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/quotagate_upstream_errors_total\{api="[^"]+",outcome="unreachable"\} 1/);
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({
      status: 502,
      outcome: 'unreachable',
      bytesOut: Buffer.byteLength(res.body),
    });
  });

  it('answers 504 when the upstream does not respond within proxyTimeout', async () => {
    const hung = await upstreamWith(() => undefined);
    const gateway = await gatewayFor(hung.url, { proxyTimeout: 300 });
    const started = Date.now();
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    const elapsed = Date.now() - started;
    expect(res.status).toBe(504);
    expect(JSON.parse(res.body).id).toBe('com.vendor.api.gateway_timeout');
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2000);
  });

  it('puts a proxyTimeout changed by a reload in force for the next exchange, on a kept-alive connection', async () => {
    let hang = false;
    const upstream = await upstreamWith((_req, res) => {
      if (!hang) res.end('ok');
    });
    const gateway = await gatewayFor(upstream.url, { proxyTimeout: 30_000 });
    expect((await request(gateway.url, { path: '/pets/1', headers: auth })).status).toBe(200);
    const outcome = await gateway.reloadWith(petsConfig(upstream.url, { proxyTimeout: 200 }));
    expect(outcome).toMatchObject({ applied: true });
    hang = true;
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(504);
    // The same pooled upstream connection carried both exchanges.
    expect(new Set(upstream.requests.map((seen) => seen.socket)).size).toBe(1);
  });

  it('holds a slow upload against the client, not the upstream: proxyTimeout runs once the body is sent', async () => {
    let answer = true;
    const upstream = await upstreamWith((_req, res) => {
      if (answer) res.end('ok');
    });
    const gateway = await gatewayFor(upstream.url, { proxyTimeout: 300 });
    const post = () =>
      new Promise<{ status: number; afterUploadMs: number }>((resolve, reject) => {
        let uploadedAt = 0;
        const req = http.request(
          `${gateway.url}/pets`,
          { method: 'POST', headers: { ...auth, 'content-length': '4' } },
          (res) => {
            res.resume();
            resolve({ status: res.statusCode ?? 0, afterUploadMs: Date.now() - uploadedAt });
          },
        );
        req.on('error', reject);
        req.write('ab');
        // The rest comes after more than proxyTimeout.
        setTimeout(() => {
          uploadedAt = Date.now();
          req.end('cd');
        }, 800);
      });
    expect((await post()).status).toBe(200);
    expect(upstream.requests.at(-1)!.body).toBe('abcd');
    answer = false;
    const unanswered = await post();
    expect(unanswered.status).toBe(504);
    expect(unanswered.afterUploadMs).toBeGreaterThanOrEqual(250);
  });

  it('verifies the certificate of an HTTPS upstream: one it cannot trust is a 502, never a plain exchange', async () => {
    const certificate = await createTestCertificate();
    const server = https.createServer(
      { key: readFileSync(certificate.keyFile), cert: certificate.cert },
      (_req, res) => res.end('should not be reached'),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    defer(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(certificate.dir, { recursive: true, force: true });
    });
    const { port } = server.address() as net.AddressInfo;
    const gateway = await gatewayFor(`https://127.0.0.1:${port}`);
    const res = await request(gateway.url, { path: '/pets/1', headers: auth });
    expect(res.status).toBe(502);
    expect(accessLines(gateway).at(-1)).toMatchObject({ status: 502, outcome: 'unreachable' });
  });

  it('closes the client connection promptly when the upstream resets mid-response', async () => {
    const resetting = await upstreamWith((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const gateway = await gatewayFor(resetting.url);
    const started = Date.now();
    const outcome = await new Promise<string>((resolve) => {
      const req = http.get(`${gateway.url}/pets/1`, { headers: auth }, (res) => {
        res.on('data', () => undefined);
        res.on('end', () => resolve('ended'));
        res.on('error', () => resolve('broken'));
        res.on('aborted', () => resolve('broken'));
      });
      req.on('error', () => resolve('broken'));
    });
    expect(outcome).toBe('broken');
    expect(Date.now() - started).toBeLessThan(2000);
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({ status: 200, outcome: 'reset' });
  });

  it('destroys the upstream request when the client aborts', async () => {
    let upstreamClosed!: () => void;
    const closedUpstream = new Promise<void>((resolve) => (upstreamClosed = resolve));
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
    const slow = await upstreamWith((req) => {
      req.socket.on('close', upstreamClosed);
      arrived();
    });
    const gateway = await gatewayFor(slow.url);
    const client = net.connect(Number(new URL(gateway.url).port), '127.0.0.1');
    client.write(`GET /pets/1 HTTP/1.1\r\nHost: gw\r\nAuthorization: ${auth.authorization}\r\n\r\n`);
    await requestArrived;
    client.destroy();
    await closedUpstream;
    await nextTick();
    expect(accessLines(gateway).at(-1)).toMatchObject({ outcome: 'client_aborted' });
  });
});
