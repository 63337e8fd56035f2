import type { ServerHttp2Stream } from 'node:http2';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { takesTrailers } from '../../../src/upstream/fields/hop-by-hop.js';
import { carriesGrpcStatus, withoutGrpcStatus } from '../../../src/upstream/handlers/grpc-trailers-only.js';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { grpcHead, helloMessage, startShapedGrpcUpstream } from '../../helpers/shaped-grpc-upstream.js';
import { originOf, startFront, testHost } from '../../helpers/upstream-exchanges.js';

/**
 * The gRPC trailers-only handler: a call's status kept as gRPC says, whatever shape the upstream's
 * answer takes, and reported to the pipeline, which renders it.
 */
const defer = cleanupAfterEach();

/** A front whose exchanges are calls of a gRPC API, to an upstream that answers as `answer` shapes it. */
async function callsTo(answer: (stream: ServerHttp2Stream) => void, grpcClient = true) {
  const upstream = await startShapedGrpcUpstream(answer, defer);
  const host = testHost();
  const front = await startFront(originOf(upstream.url, true), host, (exchange, req) => {
    exchange.grpc = true;
    exchange.grpcClient = grpcClient;
    exchange.relaysTrailers = takesTrailers(req);
    exchange.fields.push('x-request-id', 'r1');
  });
  defer(() => front.close());
  return { host, front };
}

const call = (url: string) =>
  request(url, {
    method: 'POST',
    headers: { te: 'trailers', 'content-type': 'application/grpc' },
    body: 'm',
  });

describe('a gRPC call through the trailers-only handler', () => {
  it("ends a trailers-only answer with its head, the gateway's fields among them, and reports its status", async () => {
    const { front } = await callsTo((stream) =>
      stream.respond(grpcHead({ 'grpc-status': '5', 'grpc-message': 'not found' }), { endStream: true }),
    );
    const answer = await call(front.url);
    await answer.body.text();
    expect(answer.headers['grpc-status']).toBe('5');
    const reports = front.exchanges[0]!.reports;
    expect(reports[0]).toEqual({ kind: 'grpcStatus', httpStatus: 200, grpcStatus: '5' });
    expect(reports[1]).toMatchObject({ kind: 'trailersOnly' });
    const head = (reports[1] as { head: readonly string[] }).head;
    expect(head.slice(0, 2)).toEqual(['x-request-id', 'r1']);
    expect(head).toContain('grpc-message');
  });

  it("drops a status from a head that messages follow: the trailers' is the call's", async () => {
    const { front } = await callsTo((stream) => {
      stream.respond(grpcHead({ 'grpc-status': '0' }), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '7' }));
      stream.end(helloMessage('hello'));
    });
    const answer = await call(front.url);
    await answer.body.arrayBuffer();
    expect(answer.headers['grpc-status']).toBeUndefined();
    expect(answer.trailers).toEqual({ 'grpc-status': '7' });
    expect(front.exchanges[0]!.reports).toEqual([{ kind: 'grpcStatus', httpStatus: 200, grpcStatus: '7' }]);
  });

  it("gives a call its upstream ended without a status the pipeline's, and the proxy is told", async () => {
    const { host, front } = await callsTo((stream) => {
      stream.respond(grpcHead(), { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'x-other': 'a' }));
      stream.end(helloMessage('hello'));
    });
    const answer = await call(front.url);
    await answer.body.arrayBuffer();
    expect(answer.trailers).toEqual({ 'x-other': 'a', 'grpc-status': '13' });
    expect(front.exchanges[0]!.reports).toEqual([{ kind: 'grpcStatusMissing' }]);
    expect(host.withoutStatus).toEqual([front.exchanges[0]]);
  });

  it('reports the status a client reads from another HTTP status, only to a client that reads gRPC', async () => {
    const unavailable = (stream: ServerHttp2Stream) =>
      stream.respond({ ':status': 503 }, { endStream: true });
    const grpc = await callsTo(unavailable);
    expect((await call(grpc.front.url)).statusCode).toBe(503);
    expect(grpc.front.exchanges[0]!.reports).toEqual([
      { kind: 'grpcStatus', httpStatus: 503, grpcStatus: undefined },
    ]);
    const plain = await callsTo(unavailable, false);
    expect((await call(plain.front.url)).statusCode).toBe(503);
    expect(plain.front.exchanges[0]!.reports).toEqual([]);
  });
});

describe("a head's status fields", () => {
  it('are found, and left out of a head, whichever of them it carries', () => {
    expect(carriesGrpcStatus({ 'grpc-status-details-bin': 'x' })).toBe(true);
    expect(carriesGrpcStatus({ 'content-type': 'application/grpc' })).toBe(false);
    expect(withoutGrpcStatus(['grpc-status', '0', 'a', 'b', 'grpc-message', 'ok'])).toEqual(['a', 'b']);
  });
});
