import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool, request, type Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { takesTrailers } from '../../../src/upstream/fields/hop-by-hop.js';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { originOf, startFront, testHost } from '../../helpers/upstream-exchanges.js';

/**
 * The response writer's coupling with undici (handlers/response-writer.ts `endAnswer`): how undici hands
 * a handler the trailers it parsed from its `rawTrailers`. These fail when an upgrade of undici changes
 * what the writer relies on.
 */
const defer = cleanupAfterEach();

/** An upstream on 127.0.0.1 that answers chunked, with `trailers` (raw name, value pairs) after its body. */
async function upstreamWithTrailers(trailers: Array<[string, string]>): Promise<string> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('part one, ');
    res.write('part two');
    if (trailers.length > 0) res.addTrailers(trailers);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Told {
  body: string;
  trailers: IncomingHttpHeaders | null;
  raw: unknown;
}

/** Dispatches a GET on a real undici Pool, as the proxy does, and resolves with what its handler was told. */
function told(url: string): Promise<Told> {
  const pool = new Pool(url, { pipelining: 1 });
  defer(() => pool.destroy());
  const seen: Told = { body: '', trailers: null, raw: null };
  return new Promise((resolve, reject) => {
    // undici takes a handler for one of its new API by its `onRequestStart`, as the exchange has one.
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => undefined,
      onResponseData: (_controller, chunk) => void (seen.body += chunk.toString()),
      onResponseEnd(controller, trailers) {
        seen.trailers = trailers;
        seen.raw = (controller as unknown as { rawTrailers?: unknown }).rawTrailers;
        resolve(seen);
      },
      onResponseError: (_controller, error) => reject(error),
    };
    pool.dispatch({ path: '/', method: 'GET', headers: [] }, handler);
  });
}

describe("undici's trailers, as the response writer takes them", () => {
  it('hands the trailers as one object, names in lower case and a repeated name as a list', async () => {
    const url = await upstreamWithTrailers([
      ['X-Checksum', 'a'],
      ['x-checksum', 'b'],
      ['Grpc-Status', '0'],
    ]);
    const seen = await told(url);
    expect(seen.trailers).toEqual({ 'x-checksum': ['a', 'b'], 'grpc-status': '0' });
  });

  it('tells the end only after every chunk of the body before it', async () => {
    const seen = await told(await upstreamWithTrailers([['x-checksum', 'a']]));
    expect(seen.body).toBe('part one, part two');
  });

  it('leaves the raw list it parsed them from on its controller, as name and value buffers', async () => {
    const seen = await told(await upstreamWithTrailers([['X-Checksum', 'a']]));
    expect(Array.isArray(seen.raw)).toBe(true);
    expect((seen.raw as Buffer[]).map((part) => part.toString())).toEqual(['X-Checksum', 'a']);
  });

  it('hands an empty object for an answer without trailers', async () => {
    const seen = await told(await upstreamWithTrailers([]));
    expect(seen.trailers).toEqual({});
  });
});

describe('the response writer', () => {
  it("relays the upstream's end-to-end trailers to a client that takes them, and its body as it came", async () => {
    const url = await upstreamWithTrailers([
      ['X-Checksum', 'a'],
      ['Connection', 'close'],
    ]);
    const host = testHost();
    const front = await startFront(originOf(url), host, (exchange, req) => {
      exchange.relaysTrailers = takesTrailers(req);
    });
    defer(() => front.close());
    const answer = await request(front.url, { headers: { te: 'trailers' } });
    expect(await answer.body.text()).toBe('part one, part two');
    expect(answer.trailers).toEqual({ 'x-checksum': 'a' });
    expect(front.exchanges[0]!.bytesOut).toBe('part one, part two'.length);
    expect(host.added).toHaveLength(1);
  });

  it("lets the gateway's fields win over the upstream's, and drops none a client that takes no trailers needs", async () => {
    const url = await upstreamWithTrailers([['x-checksum', 'a']]);
    const front = await startFront(originOf(url), testHost(), (exchange) => {
      exchange.fields.push('content-type', 'application/gateway');
    });
    defer(() => front.close());
    const answer = await request(front.url);
    await answer.body.text();
    expect(answer.headers['content-type']).toBe('application/gateway');
    expect(answer.headers['trailer']).toBeUndefined();
    expect(answer.trailers).toEqual({});
  });
});
