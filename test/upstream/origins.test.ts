import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { request, type Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import type { CompiledApi } from '../../src/catalog/router.js';
import type { ApiConfig } from '../../src/config/schema.js';
import { systemClock } from '../../src/kit/clock.js';
import { Origins, sendFirst, type OriginUse } from '../../src/upstream/origins.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';

/**
 * The origins' coupling with http-proxy-3 (origins.ts `sendFirst`): the gateway's pass runs first in
 * `web()` and halts its pass loop. These fail when an upgrade of http-proxy-3 changes what it relies on.
 */
const defer = cleanupAfterEach();

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An upstream that counts the requests that reach it. */
async function countingUpstream(): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const url = await listen(
    http.createServer((_req, res) => {
      requests += 1;
      res.end('from the upstream');
    }),
  );
  return { url, requests: () => requests };
}

describe("http-proxy-3's web passes, as the origins use them", () => {
  it("runs the gateway's pass with the request and response, and none of its own after it", async () => {
    const upstream = await countingUpstream();
    const server = createProxyServer({
      target: new URL(upstream.url),
      selfHandleResponse: true,
      xfwd: false,
    });
    const events: string[] = [];
    server.on('proxyReq', () => events.push('proxyReq'));
    server.on('proxyRes', () => events.push('proxyRes'));
    server.on('start', () => events.push('start'));
    server.on('end', () => events.push('end'));
    const given: Array<[IncomingMessage, ServerResponse]> = [];
    const seen: Array<[IncomingMessage, ServerResponse]> = [];
    sendFirst(server, (req, res) => {
      seen.push([req, res]);
      res.end('from the pass');
    });
    const front = await listen(
      http.createServer((req, res) => {
        given.push([req, res]);
        server.web(req, res);
      }),
    );
    const answer = await request(`${front}/pets`);
    expect(await answer.body.text()).toBe('from the pass');
    expect(seen).toHaveLength(1);
    expect(seen[0]![0]).toBe(given[0]![0]);
    expect(seen[0]![1]).toBe(given[0]![1]);
    expect(seen[0]![0].url).toBe('/pets');
    expect(upstream.requests()).toBe(0);
    expect(events).toEqual([]);
  });

  it('refuses a pass put before one it does not have, so that a renamed first pass fails here', () => {
    const server = createProxyServer({ target: new URL('http://127.0.0.1:1') });
    expect(() => server.before('web', 'noSuchPass', () => true)).toThrow();
    expect(() => sendFirst(server, () => undefined)).not.toThrow();
  });
});

const apiAt = (origin: string, protocol: 'http' | 'grpc' = 'http'): CompiledApi =>
  ({ config: { protocol }, upstreamOrigin: origin }) as unknown as CompiledApi;

/** The config of an API of the one-URL form, as a reload puts it in force. */
const configAt = (upstream: string): ApiConfig =>
  ({ id: 'api', protocol: 'http', upstream }) as unknown as ApiConfig;

/** Every target healthy, none ejected: these tests are of the one-URL form. */
const healthy = () => ({ healthy: true, failures: 0, successes: 0 });
const inGoodStanding = () => ({ failures: 0, ejected: false, ejection: null, ejections: 0 });

/** The response of each request the front server took, as the gateway links them through its exchange. */
const sent = new WeakMap<IncomingMessage, ServerResponse>();

describe('the origins', () => {
  const use: OriginUse = {
    send: (req) => void sent.get(req)!.end('sent'),
    webSocketSteps: {
      requested: () => undefined,
      switching: () => undefined,
      opened: () => undefined,
      failed: () => undefined,
    },
  };

  it('share one origin among the APIs of one upstream and protocol, and open another for another', async () => {
    const origins = new Origins(use, () => 1_000, systemClock, healthy, inGoodStanding);
    defer(() => origins.close());
    const first = origins.of(apiAt('http://127.0.0.1:8080'));
    expect(origins.of(apiAt('http://127.0.0.1:8080'))).toBe(first);
    expect(origins.of(apiAt('http://127.0.0.1:8080', 'grpc'))).not.toBe(first);
    expect(origins.of(apiAt('http://127.0.0.1:8081'))).not.toBe(first);
    expect(first.host).toBe('127.0.0.1:8080');
  });

  it("send an exchange through its origin's server to the gateway's pass", async () => {
    const origins = new Origins(use, () => 1_000, systemClock, healthy, inGoodStanding);
    defer(() => origins.close());
    const origin = origins.of(apiAt('http://127.0.0.1:1'));
    const front = await listen(
      http.createServer((req, res) => {
        sent.set(req, res);
        origin.server.web(req, res);
      }),
    );
    expect(await (await request(front)).body.text()).toBe('sent');
  });

  it('retire the origins no API in force uses, and open one again for an exchange of the config replaced', () => {
    const origins = new Origins(use, () => 1_000, systemClock, healthy, inGoodStanding);
    defer(() => origins.close());
    const [gone, kept, grpc] = [
      apiAt('http://127.0.0.1:8080'),
      apiAt('http://127.0.0.1:8081'),
      apiAt('http://127.0.0.1:8082', 'grpc'),
    ];
    const [retired, used, h2] = [origins.of(gone), origins.of(kept), origins.of(grpc)];
    origins.retireUnused([configAt('http://127.0.0.1:8081/base')]);
    expect((retired.pool as Pool).closed).toBe(true);
    expect((used.pool as Pool).closed).toBe(false);
    expect(origins.of(kept)).toBe(used);
    // An HTTP/2 upstream has no graceful close: it stays, its connections closing once idle.
    expect(origins.of(grpc)).toBe(h2);
    // A closed pool takes no exchange: one routed before the reload, forwarded after it, has a new one.
    const again = origins.of(gone);
    expect(again).not.toBe(retired);
    expect((again.pool as Pool).closed).toBe(false);
  });
});
