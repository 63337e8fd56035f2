import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { responseOnSocket } from '../../../src/gateway/edge/websocket-handshake.js';
import type { ExchangeRecord } from '../../../src/gateway/record.js';
import { identify } from '../../../src/gateway/steps/identify.js';
import { rawExchange } from '../../helpers/raw-http.js';
import { answeringAuthenticator, stepRuleSet } from '../../helpers/step-parts.js';

describe('the HTTP/1.1 edge', () => {
  const ruleSet = stepRuleSet(answeringAuthenticator({ ok: true, principal: null }).authenticator);
  let server: Server | null = null;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  /** A server that makes a record of each request, as the pipeline does, and answers 204. */
  async function serve(): Promise<{ url: string; records: ExchangeRecord[] }> {
    const records: ExchangeRecord[] = [];
    server = createServer((req, res) => {
      records.push(identify(req, res, false, null, ruleSet, false));
      res.writeHead(204).end();
    });
    server.on('upgrade', (req, socket: Socket, head: Buffer) => {
      const res = responseOnSocket(req, socket);
      records.push(identify(req, res, false, head, ruleSet, false));
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, records };
  }

  it('gives the record its version and form once: HTTP/1.0, HTTP/1.1, a gRPC content type over HTTP/1.1', async () => {
    const { url, records } = await serve();
    await rawExchange(url, 'GET /pets/1 HTTP/1.0\r\nHost: a\r\n\r\n');
    await rawExchange(url, 'GET /pets/1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    await rawExchange(
      url,
      'POST /x HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    );
    expect(records.map((record) => [record.version, record.form])).toEqual([
      ['HTTP/1.0', 'http'],
      ['HTTP/1.1', 'http'],
      // gRPC runs over HTTP/2 alone: over HTTP/1.1 the call is an HTTP request, answered in HTTP.
      ['HTTP/1.1', 'http'],
    ]);
  });

  it('tells a WebSocket opening from an upgrade to another protocol, and keeps the bytes after the head', async () => {
    const { url, records } = await serve();
    const key = 'dGhlIHNhbXBsZSBub25jZQ==';
    await rawExchange(
      url,
      `GET /pets/1 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\nframe`,
    );
    await rawExchange(url, 'GET /pets/1 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
    expect(records.map((record) => record.form)).toEqual(['opening', 'upgrade']);
    expect(records[0]!.upgradeHead?.toString()).toBe('frame');
  });
});
