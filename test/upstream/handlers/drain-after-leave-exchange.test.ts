import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { Exchange } from '../../../src/upstream/exchange.js';
import { cleanupAfterEach } from '../../helpers/cleanups.js';
import { KeepingWatch, originOf, startFront, testHost } from '../../helpers/upstream-exchanges.js';

/**
 * The drain after the client leaves (undici's `interceptor/dump.js`, as the exchange's
 * `readRestOfAnswer`): the rest of an answer is read for what it says it cost, and nothing more written.
 */
const defer = cleanupAfterEach();

/** An upstream that sends a first chunk, then the rest and its trailers once `finish` is called. */
async function slowUpstream(): Promise<{ url: string; finish: () => void }> {
  let held: ServerResponse | null = null;
  let finishWhenAsked = false;
  const finish = (res: ServerResponse) => {
    res.addTrailers({ 'x-units': '42' });
    res.end('the rest');
  };
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { trailer: 'x-units' });
    res.write('first ');
    if (finishWhenAsked) finish(res);
    else held = res;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    finish: () => {
      if (held) finish(held);
      else finishWhenAsked = true;
    },
  };
}

describe('the drain after the client leaves', () => {
  it('reads the rest of the answer and its trailers once the client has gone, writing none of it', async () => {
    const upstream = await slowUpstream();
    const host = testHost();
    const watch = new KeepingWatch();
    const drained: Exchange[] = [];
    const front = await startFront(originOf(upstream.url), host, (exchange) => {
      exchange.bodyWatch = watch;
      exchange.res.once('close', () => exchange.readRestOfAnswer((done) => drained.push(done)));
    });
    defer(() => front.close());
    const controller = new AbortController();
    const answer = await request(front.url, { signal: controller.signal });
    for await (const chunk of answer.body) if (String(chunk).includes('first')) break;
    controller.abort();
    while (host.drains.size === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    upstream.finish();
    while (drained.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const exchange = front.exchanges[0]!;
    expect(drained).toEqual([exchange]);
    expect(exchange.responseTrailers).toEqual({ 'x-units': '42' });
    expect(Buffer.concat(watch.chunks).toString()).toBe('first the rest');
    expect(exchange.bytesOut).toBe('first '.length);
    expect(host.drains.size).toBe(0);
  });

  it('reads nothing once the answer is over', async () => {
    const upstream = await slowUpstream();
    upstream.finish();
    const front = await startFront(originOf(upstream.url), testHost());
    defer(() => front.close());
    expect(await (await request(front.url)).body.text()).toBe('first the rest');
    expect(front.exchanges[0]!.readRestOfAnswer(() => undefined)).toBe(false);
  });
});
