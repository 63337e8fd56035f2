import http, { type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

// Every request's listeners are functions shared by all requests, each finding its own record through
// the emitter: requests in flight together must never count, answer or log for one another.
describe('requests in flight together', () => {
  const count = 24;
  let upstream: http.Server;
  let gateway: TestGateway;
  /** Resolves once every request's head has reached the upstream, before any body is complete. */
  let allForwarded: Promise<void>;

  beforeAll(async () => {
    let arrived = 0;
    let release: () => void;
    allForwarded = new Promise((resolve) => (release = resolve));
    upstream = http.createServer((req, res) => {
      arrived += 1;
      if (arrived === count) release();
      let received = 0;
      req.on('data', (chunk: Buffer) => (received += chunk.length));
      req.on('end', () => {
        const size = Number(req.headers['x-answer-bytes']);
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': size, 'x-received': received });
        // Two writes, so that the answers' chunks interleave on the gateway too.
        res.write('r'.repeat(Math.floor(size / 2)));
        setImmediate(() => res.end('r'.repeat(size - Math.floor(size / 2))));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    gateway = await startTestGateway(petsConfig(`http://127.0.0.1:${port}`));
  });

  afterAll(async () => {
    await gateway.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('gives each its own response and its own byte counts in the access log', async () => {
    const cases = Array.from({ length: count }, (_, i) => ({
      id: `concurrent-${i}`,
      sent: 1_000 + ((i * 7_919) % 40_000),
      answered: 100 + ((i * 3_571) % 70_000),
    }));
    const { port } = new URL(gateway.url);
    const answers = cases.map(({ id, sent, answered }) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/pets',
        agent: false,
        headers: {
          authorization: basicAuth(devKey),
          'x-request-id': id,
          'x-answer-bytes': String(answered),
          'content-type': 'text/plain',
          'content-length': String(sent),
        },
      });
      // Node sends the head upstream with the first body bytes: half of each body goes at once.
      req.write('s'.repeat(Math.floor(sent / 2)));
      const answer = new Promise<{ status: number; id: string; received: string; length: number }>(
        (resolve, reject) => {
          req.on('error', reject);
          req.on('response', (res: IncomingMessage) => {
            let length = 0;
            res.on('data', (chunk: Buffer) => (length += chunk.length));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                id: String(res.headers['x-request-id']),
                received: String(res.headers['x-received']),
                length,
              }),
            );
          });
        },
      );
      return { req, sent, answer };
    });
    // Every request is forwarded before the second halves go, in the reverse order.
    await allForwarded;
    for (const { req, sent } of answers.reverse()) req.end('s'.repeat(sent - Math.floor(sent / 2)));
    const responses = await Promise.all(answers.reverse().map(({ answer }) => answer));

    responses.forEach((response, i) => {
      expect(response).toEqual({
        status: 200,
        id: cases[i]!.id,
        received: String(cases[i]!.sent),
        length: cases[i]!.answered,
      });
    });
    await expect
      .poll(() => gateway.logs.filter((line) => String(line.requestId).startsWith('concurrent-')).length)
      .toBe(count);
    for (const { id, sent, answered } of cases) {
      const line = gateway.logs.find((entry) => entry.requestId === id)!;
      expect({ id, bytesIn: line.bytesIn, bytesOut: line.bytesOut }).toEqual({
        id,
        bytesIn: sent,
        bytesOut: answered,
      });
    }
  });
});
