import http, { type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { poolConfig } from '../helpers/pool-gateways.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const defer = cleanupAfterEach();

/** An upstream that counts its open connections, and holds the answer to `…/held` half written. */
interface CountingUpstream {
  url: string;
  /** Its connections open now. */
  readonly open: ReadonlySet<Socket>;
  /** The connection each request came on, in order. */
  readonly requestSockets: Socket[];
  /** Answers held now, their first half written. */
  readonly held: ServerResponse[];
  close(): Promise<void>;
}

async function countingUpstream(): Promise<CountingUpstream> {
  const open = new Set<Socket>();
  const requestSockets: Socket[] = [];
  const held: ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    requestSockets.push(req.socket);
    req.resume();
    req.on('end', () => {
      if (!req.url!.endsWith('/held')) return void res.end('pet');
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first half, ');
      held.push(res);
    });
  });
  // Its Keep-Alive hint keeps an idle connection for a minute: one closed sooner is the gateway's doing.
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const upstream: CountingUpstream = {
    url: `http://127.0.0.1:${port}`,
    open,
    requestSockets,
    held,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  defer(() => upstream.close());
  return upstream;
}

/** A second API, `/toys`, with its own upstream. */
const toysApi = (upstream: string) => ({
  id: '9a7d3c51-0e2b-4f6a-8c19-3b5e7d2f4a60',
  name: 'Toy Store',
  basePath: '/toys',
  upstream,
  methods: [{ id: '2c4e6a8b-1d3f-4b5a-9c7e-0f2a4c6e8b13', name: 'getToy', verb: 'GET', path: '/{toyId}' }],
});

/** A third API, `/birds`, that a reload brings. */
const birdsApi = (upstream: string) => ({
  id: '6e1b9d47-3a2c-4f8e-b5d0-7c9a1e3f5b82',
  name: 'Bird Store',
  basePath: '/birds',
  upstream,
  methods: [{ id: '4f8a2c6e-9b1d-4e3a-8c5f-2d7b9e1a3c64', name: 'getBird', verb: 'GET', path: '/{birdId}' }],
});

/** The pets API to `pets`, with `others` after it. */
function config(pets: string, ...others: Array<Record<string, unknown>>): Record<string, unknown> {
  const base = petsConfig(pets);
  return { ...base, apis: [...(base.apis as unknown[]), ...others] };
}

async function gatewayWith(first: Record<string, unknown>): Promise<TestGateway> {
  const gateway = await startTestGateway(first);
  defer(() => gateway.close());
  return gateway;
}

const get = (gateway: TestGateway, path: string) => request(gateway.url, { path, headers: auth });

describe('a reload that changes an upstream', () => {
  it('closes the connections of an origin no API uses any more, once its exchange in flight is answered', async () => {
    const old = await countingUpstream();
    const fresh = await countingUpstream();
    const kept = await countingUpstream();
    const gateway = await gatewayWith(config(old.url, toysApi(kept.url)));
    // An exchange held on one connection, and an idle one beside it.
    const inFlight = get(gateway, '/pets/held');
    await vi.waitFor(() => expect(old.held).toHaveLength(1));
    expect((await get(gateway, '/pets/1')).body).toBe('pet');
    expect((await get(gateway, '/toys/1')).body).toBe('pet');
    expect([old.open.size, kept.open.size]).toEqual([2, 1]);

    // The toys API leaves; the birds API takes its origin, and the pets API another.
    const next = config(fresh.url, birdsApi(kept.url));
    expect(await gateway.reloadWith(next)).toMatchObject({ applied: true });
    // The idle connection closes at once; the one of the exchange in flight stays for its answer.
    await vi.waitFor(() => expect(old.open.size).toBe(1));
    old.held[0]!.end('second half');
    expect(await inFlight).toMatchObject({ status: 200, body: 'first half, second half' });
    await vi.waitFor(() => expect(old.open.size).toBe(0));

    expect((await get(gateway, '/pets/2')).body).toBe('pet');
    expect(fresh.requestSockets).toHaveLength(1);
    // The origin the birds API still uses keeps its connection: its request comes on the toys' one.
    expect((await get(gateway, '/birds/1')).body).toBe('pet');
    expect(kept.requestSockets).toHaveLength(2);
    expect(kept.requestSockets[1]).toBe(kept.requestSockets[0]);
    expect(kept.open.size).toBe(1);
  });

  it('closes the connections of a pool target it removes, and keeps those of the targets it keeps', async () => {
    const one = await countingUpstream();
    const two = await countingUpstream();
    const gateway = await gatewayWith(poolConfig({ targets: [one.url, two.url] }));
    for (let i = 0; i < 4; i += 1) expect((await get(gateway, `/pets/${i}`)).body).toBe('pet');
    expect([one.requestSockets.length, two.requestSockets.length]).toEqual([2, 2]);
    expect([one.open.size, two.open.size]).toEqual([1, 1]);

    expect(await gateway.reloadWith(poolConfig({ targets: [two.url] }))).toMatchObject({ applied: true });
    await vi.waitFor(() => expect(one.open.size).toBe(0));
    expect((await get(gateway, '/pets/5')).body).toBe('pet');
    expect(two.requestSockets).toHaveLength(3);
    expect(new Set(two.requestSockets).size).toBe(1);
    expect(two.open.size).toBe(1);
  });
});
