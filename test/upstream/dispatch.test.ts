import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { responseWriter } from '../../src/upstream/handlers/response-writer.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { grpcHead, startShapedGrpcUpstream } from '../helpers/shaped-grpc-upstream.js';
import { KeepingWatch, originOf, startFront, testHost } from '../helpers/upstream-exchanges.js';

/** The dispatch: each exchange goes upstream through the handlers its API and request need, and no more. */
const defer = cleanupAfterEach();

async function plainUpstream(): Promise<string> {
  const server = http.createServer((req, res) => {
    res.setHeader('x-seen-host', req.headers.host ?? '');
    res.end('answer');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the dispatch', () => {
  it("gives a plain API's exchange the response writer alone, and no deadline", async () => {
    const url = await plainUpstream();
    const front = await startFront(originOf(url), testHost(), (exchange) => {
      exchange.deadlineMs = 1;
    });
    defer(() => front.close());
    const answer = await request(front.url);
    expect(await answer.body.text()).toBe('answer');
    const exchange = front.exchanges[0]!;
    expect(exchange.chain).toBe(responseWriter);
    expect(exchange.deadline).toBeNull();
    expect(answer.headers['x-seen-host']).toBe(new URL(url).host);
  });

  it('puts the body watch in the chain of an exchange that has one, and shows it what the client is sent', async () => {
    const url = await plainUpstream();
    const watch = new KeepingWatch();
    const front = await startFront(originOf(url), testHost(), (exchange) => {
      exchange.bodyWatch = watch;
    });
    defer(() => front.close());
    expect(await (await request(front.url)).body.text()).toBe('answer');
    expect(front.exchanges[0]!.chain).not.toBe(responseWriter);
    expect(Buffer.concat(watch.chunks).toString()).toBe('answer');
    expect(watch.headers).toMatchObject({ 'content-length': '6' });
  });

  it("gives a gRPC API's exchange its own chain, and asks its upstream for trailers", async () => {
    const asked: Array<string | string[] | undefined> = [];
    const upstream = await startShapedGrpcUpstream((stream, headers) => {
      asked.push(headers.te);
      stream.respond(grpcHead({ 'grpc-status': '0' }), { endStream: true });
    }, defer);
    const front = await startFront(originOf(upstream.url, true), testHost(), (exchange) => {
      exchange.grpc = true;
    });
    defer(() => front.close());
    await (await request(front.url, { method: 'POST', body: 'm' })).body.text();
    expect(front.exchanges[0]!.chain).not.toBe(responseWriter);
    expect(asked).toEqual(['trailers']);
  });
});
