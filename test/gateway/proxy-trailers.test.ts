import http, { type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http2Fetch } from '../helpers/http2-client.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

let upstream: TestUpstream;
let gateway: TestGateway;
const auth = { authorization: basicAuth(devKey) };
const body = 'four legs, one tail';

beforeAll(async () => {
  // An upstream that ends each answer with a checksum and a gRPC-style status, announced in Trailer.
  upstream = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum, grpc-status' });
    res.write(body);
    res.addTrailers({ 'x-checksum': 'sha256=4f2a', 'grpc-status': '0' });
    res.end();
  });
  gateway = await startTestGateway(petsConfig(`${upstream.url}/pets`));
});

afterAll(async () => {
  await gateway.close();
  await upstream.close();
});

interface Http1Answer {
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  trailers: Record<string, string | undefined>;
}

/** A GET with Node's HTTP/1.1 client, which reads trailers of a chunked answer. */
function http1Get(path: string, headers: Record<string, string>): Promise<Http1Answer> {
  return new Promise((resolve, reject) => {
    const url = new URL(gateway.url);
    http
      .get({ host: url.hostname, port: url.port, path, headers, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ headers: res.headers, rawHeaders: res.rawHeaders, body: text, trailers: res.trailers }),
        );
      })
      .on('error', reject);
  });
}

describe('trailers of an upstream answer', () => {
  it('reach an HTTP/1.1 client that sent TE: trailers, in a chunked answer that announces them', async () => {
    const answer = await http1Get('/pets/1', { ...auth, te: 'trailers' });
    expect(answer.body).toBe(body);
    expect(answer.headers['transfer-encoding']).toBe('chunked');
    expect(answer.headers.trailer).toBe('x-checksum, grpc-status');
    expect(answer.trailers).toEqual({ 'x-checksum': 'sha256=4f2a', 'grpc-status': '0' });
    expect(upstream.requests.at(-1)!.headers.te).toBe('trailers');
  });

  it('never reach an HTTP/1.1 client that did not ask for them, and the upstream is not told it may send any', async () => {
    const answer = await http1Get('/pets/1', auth);
    expect(answer.body).toBe(body);
    expect(answer.trailers).toEqual({});
    expect(answer.headers.trailer).toBeUndefined();
    expect(upstream.requests.at(-1)!.headers.te).toBeUndefined();
  });

  it('take TE: trailers among other codings of the TE list', async () => {
    const answer = await http1Get('/pets/1', { ...auth, te: 'deflate;q=0.5, trailers' });
    expect(answer.trailers).toEqual({ 'x-checksum': 'sha256=4f2a', 'grpc-status': '0' });
  });

  it('always reach an HTTP/2 client, after the body', async () => {
    const answer = await http2Fetch(gateway.url, { path: '/pets/1', headers: auth });
    expect(answer.body).toBe(body);
    expect(answer.trailers).toMatchObject({ 'x-checksum': 'sha256=4f2a', 'grpc-status': '0' });
    expect(upstream.requests.at(-1)!.headers.te).toBe('trailers');
  });
});

describe('trailers that are not end-to-end', () => {
  let hopUpstream: TestUpstream;
  let hopGateway: TestGateway;

  beforeAll(async () => {
    hopUpstream = await startUpstream((_req, res) => {
      res.writeHead(200, { trailer: 'x-checksum, connection, keep-alive' });
      res.write(body);
      res.addTrailers({ 'x-checksum': 'sha256=4f2a', connection: 'close', 'keep-alive': 'timeout=1' });
      res.end();
    });
    hopGateway = await startTestGateway(petsConfig(`${hopUpstream.url}/pets`));
  });

  afterAll(async () => {
    await hopGateway.close();
    await hopUpstream.close();
  });

  it('are dropped: an HTTP/2 client gets the end-to-end ones only', async () => {
    const answer = await http2Fetch(hopGateway.url, { path: '/pets/1', headers: auth });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(body);
    expect(Object.keys(answer.trailers)).toEqual(['x-checksum']);
  });
});
