import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../helpers/raw-http.js';
import {
  basicAuth,
  devKey,
  type GatewayOverUpstream,
  petsConfig,
  startGatewayOverUpstream,
  type TestGateway,
  withMethods,
} from '../helpers/test-gateway.js';
import type { TestUpstream } from '../helpers/upstream.js';

/**
 * Request smuggling through the gateway, on raw sockets: a client that names framing fields in
 * `Connection`, or sends a body with a verb that proxies often frame as empty (DELETE, OPTIONS), must
 * never get a second request to the upstream. Whatever reaches the upstream is one request per client request, and its body
 * is framed (Content-Length or chunked) or absent.
 */

let upstream: TestUpstream;
let gateway: TestGateway;
let host: string;
const authorization = basicAuth(devKey);

/** A second request hidden in the body: reaching the upstream would mean no auth, no quota, any path. */
const smuggled = 'GET /internal/secret HTTP/1.1\r\nHost: upstream\r\n\r\n';

let setup: GatewayOverUpstream;

beforeAll(async () => {
  setup = await startGatewayOverUpstream((url) =>
    withMethods(petsConfig(`${url}/pets`), [
      { id: '3a6b9c2d-1e4f-4a5b-8c7d-0e1f2a3b4c5d', name: 'deletePet', verb: 'DELETE', path: '/{petId}' },
      { id: '4b7c0d3e-2f5a-4b6c-9d8e-1f2a3b4c5d6e', name: 'petOptions', verb: 'OPTIONS', path: '/{petId}' },
    ]),
  );
  ({ upstream, gateway, host } = setup);
});

afterAll(() => setup.close());

/** Sends `head` and `body` on one connection, as written, and waits for the gateway to close it. */
async function exchange(head: string[], body = ''): Promise<string> {
  return rawExchange(gateway.url, `${[...head, ''].join('\r\n')}\r\n${body}`);
}

/** The requests the upstream received during `work`. */
async function upstreamSaw(work: () => Promise<unknown>) {
  const before = upstream.requests.length;
  await work();
  // The upstream records a request once its body has ended; give a smuggled one time to arrive.
  await new Promise((resolve) => setTimeout(resolve, 100));
  return upstream.requests.slice(before);
}

const chunked = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`;

describe('request smuggling through framing fields', () => {
  it.each(['content-length', 'Content-Length', 'keep-alive, content-length', 'close, CONTENT-LENGTH'])(
    'keeps Content-Length when Connection names it (%s): the body stays a body',
    async (connection) => {
      const seen = await upstreamSaw(() =>
        exchange(
          [
            'GET /pets/1 HTTP/1.1',
            `Host: ${host}`,
            `Authorization: ${authorization}`,
            `Content-Length: ${smuggled.length}`,
            `Connection: ${connection}, close`,
          ],
          smuggled,
        ),
      );
      expect(seen.map((request) => request.url)).toEqual(['/pets/1']);
      expect(seen[0]!.headers['content-length']).toBe(String(smuggled.length));
      expect(seen[0]!.body).toBe(smuggled);
    },
  );

  it.each(['DELETE', 'OPTIONS'])(
    'forwards a chunked %s body chunked, never as Content-Length: 0 followed by the body',
    async (verb) => {
      const seen = await upstreamSaw(() =>
        exchange(
          [
            `${verb} /pets/1 HTTP/1.1`,
            `Host: ${host}`,
            `Authorization: ${authorization}`,
            'Transfer-Encoding: chunked',
            'Connection: close',
          ],
          chunked(smuggled),
        ),
      );
      expect(seen.map((request) => `${request.method} ${request.url}`)).toEqual([`${verb} /pets/1`]);
      expect(seen[0]!.headers['transfer-encoding']).toBe('chunked');
      expect(seen[0]!.headers['content-length']).toBeUndefined();
      expect(seen[0]!.body).toBe(smuggled);
    },
  );

  it.each(['DELETE', 'OPTIONS'])(
    'forwards a %s with a declared body with that Content-Length',
    async (verb) => {
      const seen = await upstreamSaw(() =>
        exchange(
          [
            `${verb} /pets/1 HTTP/1.1`,
            `Host: ${host}`,
            `Authorization: ${authorization}`,
            `Content-Length: ${smuggled.length}`,
            'Connection: content-length, close',
          ],
          smuggled,
        ),
      );
      expect(seen.map((request) => request.url)).toEqual(['/pets/1']);
      expect(seen[0]!.headers['content-length']).toBe(String(smuggled.length));
      expect(seen[0]!.body).toBe(smuggled);
    },
  );

  it('sends a Content-Length with leading zeros upstream without them, as the number Node framed by', async () => {
    const seen = await upstreamSaw(() =>
      exchange(
        [
          'POST /pets HTTP/1.1',
          `Host: ${host}`,
          `Authorization: ${authorization}`,
          `Content-Length: 000${smuggled.length}`,
          'Connection: close',
        ],
        smuggled,
      ),
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]!.rawHeaders).toContain(String(smuggled.length));
    expect(seen[0]!.body).toBe(smuggled);
  });

  it('keeps Transfer-Encoding when Connection names it', async () => {
    const seen = await upstreamSaw(() =>
      exchange(
        [
          'POST /pets HTTP/1.1',
          `Host: ${host}`,
          `Authorization: ${authorization}`,
          'Transfer-Encoding: chunked',
          'Connection: transfer-encoding, close',
        ],
        chunked(smuggled),
      ),
    );
    expect(seen.map((request) => request.url)).toEqual(['/pets']);
    expect(seen[0]!.body).toBe(smuggled);
  });

  it('keeps Host for X-Forwarded-Host when Connection names it', async () => {
    const seen = await upstreamSaw(() =>
      exchange([
        'GET /pets/1 HTTP/1.1',
        `Host: ${host}`,
        `Authorization: ${authorization}`,
        'Connection: host, close',
      ]),
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['x-forwarded-host']).toBe(host);
    expect(seen[0]!.headers.host).toBe(new URL(upstream.url).host);
  });

  it.each([
    ['Content-Length and Transfer-Encoding together', ['Content-Length: 5', 'Transfer-Encoding: chunked']],
    ['two different Content-Lengths', ['Content-Length: 5', 'Content-Length: 6']],
    ['a Transfer-Encoding that does not end in chunked', ['Transfer-Encoding: chunked, identity']],
    ['an obfuscated Transfer-Encoding', ['Transfer-Encoding: xchunked']],
    ['a transfer coding besides chunked', ['Transfer-Encoding: gzip, chunked']],
    ['a Content-Length with a sign', ['Content-Length: +5']],
  ])('answers 400 to %s and sends nothing upstream', async (_name, framing) => {
    let response = '';
    const seen = await upstreamSaw(async () => {
      response = await exchange(
        ['POST /pets HTTP/1.1', `Host: ${host}`, `Authorization: ${authorization}`, ...framing],
        chunked('hello'),
      );
    });
    expect(response).toMatch(/^HTTP\/1\.1 400 /);
    expect(seen).toEqual([]);
  });
});
