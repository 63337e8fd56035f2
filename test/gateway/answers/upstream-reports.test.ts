import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/kit/clock.js';
import { answerUpstreamFailure } from '../../../src/gateway/answers/upstream-reports.js';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { TestExchange } from '../../helpers/upstream-exchanges.js';

/** How the pipeline renders an upstream failure that upstream/ reports, without a gateway. */
const defer = cleanupAfterEach();

/** A server on 127.0.0.1 whose every request is an exchange that fails as `fail` says. */
async function failingFront(fail: (exchange: TestExchange, res: ServerResponse) => void): Promise<{
  url: string;
  exchanges: TestExchange[];
}> {
  const exchanges: TestExchange[] = [];
  const server = http.createServer((req, res) => {
    const exchange = new TestExchange(req, res);
    exchange.fields.push('x-request-id', 'r1');
    exchanges.push(exchange);
    fail(exchange, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exchanges };
}

describe("the pipeline's answer to an upstream failure", () => {
  it("answers 502 in the error table's JSON, with the gateway's fields, before anything was sent", async () => {
    const front = await failingFront((exchange) =>
      answerUpstreamFailure(exchange, false, 1_000, systemClock),
    );
    const answer = await request(front.url);
    expect(answer.statusCode).toBe(502);
    expect(answer.headers['x-request-id']).toBe('r1');
    expect(await answer.body.json()).toMatchObject({ id: 'com.vendor.api.bad_gateway', success: false });
    expect(front.exchanges[0]!.status).toBe(502);
    expect(front.exchanges[0]!.answeredBytes).toBeGreaterThan(0);
  });

  it('answers 504 to one that timed out', async () => {
    const front = await failingFront((exchange) => answerUpstreamFailure(exchange, true, 1_000, systemClock));
    const answer = await request(front.url);
    expect(answer.statusCode).toBe(504);
    expect(await answer.body.json()).toMatchObject({ id: 'com.vendor.api.gateway_timeout' });
  });

  it('breaks off an answer that had begun, so that the client sees it broken', async () => {
    const front = await failingFront((exchange, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('part');
      answerUpstreamFailure(exchange, false, 1_000, systemClock);
    });
    await expect(request(front.url).then((answer) => answer.body.text())).rejects.toThrow();
    expect(front.exchanges[0]!.status).toBe(0);
  });
});
