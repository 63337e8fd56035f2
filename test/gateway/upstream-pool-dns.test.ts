import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import type { HostResolver } from '../../src/upstream/target-addresses.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { getMany, poolConfig, served } from '../helpers/pool-gateways.js';
import { auth } from '../helpers/proxy-parts.js';
import { credentials } from '../helpers/grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from '../helpers/grpc-greeter.js';
import { request } from '../helpers/raw-http.js';
import { createPrivateCa } from '../helpers/private-ca.js';
import { useTempDirs } from '../helpers/temp-dirs.js';
import { adminCall, petsConfig, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();
const dirs = useTempDirs('quotagate-dns-');
const dnsRefresh = 5_000;

/** The answer the test gives for `svc.test`: its addresses, or a failure of the resolver. */
class SvcAnswer {
  answer: readonly string[] | Error = ['127.0.0.1', '127.0.0.2'];
  readonly resolve: HostResolver = async (hostname) => {
    if (hostname !== 'svc.test' || this.answer instanceof Error)
      throw Object.assign(new Error(`getaddrinfo EAI_AGAIN ${hostname}`), { code: 'EAI_AGAIN' });
    return this.answer;
  };
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Upstreams on 127.0.0.1 and 127.0.0.2 on one port (Linux's loopback takes all of 127/8). */
async function twoAddresses(handlers: [Handler?, Handler?] = []): Promise<[TestUpstream, TestUpstream]> {
  const answer = (handler?: Handler): Handler =>
    handler ?? ((req, res) => res.end(req.url === '/healthz' ? 'ok' : 'pet'));
  const one = await startUpstream(answer(handlers[0]));
  defer(() => one.close());
  const two = await startUpstream(answer(handlers[1]), { host: '127.0.0.2', port: one.port });
  defer(() => two.close());
  return [one, two];
}

async function gatewayOver(
  port: number,
  answer: SvcAnswer,
  clock: FakeClock,
  extra: Record<string, unknown> = {},
): Promise<TestGateway> {
  const gateway = await startTestGateway(
    poolConfig({ targets: [{ url: `http://svc.test:${port}`, weight: 2 }], dnsRefresh, ...extra }),
    {},
    { timers: clock, resolveHost: answer.resolve },
  );
  defer(() => gateway.close());
  return gateway;
}

interface ListedTarget {
  url: string;
  host: string | null;
  weight: number;
  healthy: boolean;
  requests: number;
}

/** The targets `GET /upstreams` lists for the pets API. */
async function listed(gateway: TestGateway): Promise<ListedTarget[]> {
  const [pets] = (await (await adminCall(gateway, 'GET', '/upstreams')).json()) as Array<{
    targets: ListedTarget[];
  }>;
  return pets!.targets;
}

/** Waits until the pets API's targets are the addresses `urls`. */
async function targetsBecome(gateway: TestGateway, urls: string[]): Promise<void> {
  await vi.waitFor(async () => expect((await listed(gateway)).map(({ url }) => url)).toEqual(urls));
}

describe('a target whose host name resolves to several addresses', () => {
  it('spreads the requests over each address, sent with the name as their Host', async () => {
    const [one, two] = await twoAddresses();
    const gateway = await gatewayOver(one.port, new SvcAnswer(), new FakeClock());
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    expect(new Set(await getMany(gateway, 20))).toEqual(new Set([200]));
    expect([served(one), served(two)]).toEqual([10, 10]);
    expect(new Set([...one.requests, ...two.requests].map(({ headers }) => headers.host))).toEqual(
      new Set([`svc.test:${one.port}`]),
    );
    const targets = await listed(gateway);
    expect(targets.map(({ url, host, weight, requests }) => [url, host, weight, requests])).toEqual([
      [`${one.url}/`, `svc.test:${one.port}`, 2, 10],
      [`${two.url}/`, `svc.test:${one.port}`, 2, 10],
    ]);
  });

  it('sends every new request to the addresses of the last answer once dnsRefresh has passed', async () => {
    const [one, two] = await twoAddresses();
    const answer = new SvcAnswer();
    const clock = new FakeClock();
    const gateway = await gatewayOver(one.port, answer, clock);
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    await getMany(gateway, 4);
    answer.answer = ['127.0.0.2'];
    await clock.advance(dnsRefresh - 1);
    await getMany(gateway, 4);
    expect([served(one), served(two)]).toEqual([4, 4]);
    await clock.advance(1);
    await targetsBecome(gateway, [`${two.url}/`]);
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect([served(one), served(two)]).toEqual([4, 14]);
  });

  it('keeps the addresses it had when the resolver fails, and warns once', async () => {
    const [one, two] = await twoAddresses();
    const answer = new SvcAnswer();
    const clock = new FakeClock();
    const gateway = await gatewayOver(one.port, answer, clock);
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    answer.answer = new Error('the resolver is down');
    await clock.advance(dnsRefresh);
    await clock.advance(dnsRefresh);
    await vi.waitFor(() =>
      expect(
        gateway.logs.filter(
          ({ msg }) => msg === 'upstream host name not resolved: its targets keep the addresses it had',
        ),
      ).toHaveLength(1),
    );
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect([served(one), served(two)]).toEqual([5, 5]);
    expect((await listed(gateway)).map(({ url }) => url)).toEqual([`${one.url}/`, `${two.url}/`]);
  });

  it('lets an exchange in flight to an address no longer resolved finish there, then closes its connection', async () => {
    const held: ServerResponse[] = [];
    const [one, two] = await twoAddresses([(_req, res) => held.push(res)]);
    const answer = new SvcAnswer();
    const clock = new FakeClock();
    const gateway = await gatewayOver(one.port, answer, clock);
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    const pending = request(gateway.url, { path: '/pets/held', headers: auth });
    await vi.waitFor(() => expect(held).toHaveLength(1));
    answer.answer = ['127.0.0.2'];
    await clock.advance(dnsRefresh);
    await targetsBecome(gateway, [`${two.url}/`]);
    expect(new Set(await getMany(gateway, 4))).toEqual(new Set([200]));
    held[0]!.end('late pet');
    const late = await pending;
    expect([late.status, late.body]).toEqual([200, 'late pet']);
    expect([served(one), served(two)]).toEqual([1, 4]);
    // Its answer given, the gateway closes its connection to the address (kept alive 4 s otherwise).
    await vi.waitFor(() => expect(one.requests[0]!.socket.destroyed).toBe(true));
  });

  it('stops resolving a name a reload drops, and closes the connections of its addresses', async () => {
    const [one, two] = await twoAddresses();
    const answer = new SvcAnswer();
    let asked = 0;
    const counted: HostResolver = (hostname) => {
      asked += 1;
      return answer.resolve(hostname);
    };
    const clock = new FakeClock();
    const gateway = await startTestGateway(
      poolConfig({ targets: [`http://svc.test:${one.port}`], dnsRefresh }),
      {},
      { timers: clock, resolveHost: counted },
    );
    defer(() => gateway.close());
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    await getMany(gateway, 2);
    expect(await gateway.reloadWith(poolConfig({ targets: [two.url] }))).toMatchObject({ applied: true });
    await vi.waitFor(() => expect(one.requests[0]!.socket.destroyed).toBe(true));
    expect((await listed(gateway)).map(({ url, host }) => [url, host])).toEqual([[two.url, null]]);
    await clock.advance(dnsRefresh);
    expect(asked).toBe(1);
    expect(new Set(await getMany(gateway, 4))).toEqual(new Set([200]));
    expect([served(one), served(two)]).toEqual([1, 5]);
  });

  it('checks the health of each address apart, and sends nothing to one that is out', async () => {
    const sick: Handler = (req, res) => res.writeHead(req.url === '/healthz' ? 500 : 200).end('pet');
    const [one, two] = await twoAddresses([sick]);
    const clock = new FakeClock();
    const healthCheck = {
      path: '/healthz',
      interval: 1_000,
      timeout: 500,
      unhealthyAfter: 2,
      healthyAfter: 2,
    };
    const gateway = await gatewayOver(one.port, new SvcAnswer(), clock, { healthCheck });
    await targetsBecome(gateway, [`${one.url}/`, `${two.url}/`]);
    await vi.waitFor(() => expect(one.requests.filter(({ url }) => url === '/healthz')).toHaveLength(1));
    await clock.advance(healthCheck.interval);
    await vi.waitFor(async () =>
      expect((await listed(gateway)).map(({ healthy }) => healthy)).toEqual([false, true]),
    );
    expect(one.requests.every(({ headers }) => headers.host === `svc.test:${one.port}`)).toBe(true);
    expect(new Set(await getMany(gateway, 6))).toEqual(new Set([200]));
    expect([served(one), served(two)]).toEqual([0, 6]);
  });
});

describe('a target of https:// whose host name resolves to addresses', () => {
  it('connects to each address with the name as its TLS server name, its certificate checked for the name', async () => {
    const ca = await createPrivateCa(dirs.make(), 'dns');
    // A certificate for the name alone: one checked against an address would fail.
    const named = await ca.issue('svc', ['svc.test']);
    const servernames: Array<string | undefined> = [];
    const hosts: Array<string | undefined> = [];
    const listen = (host: string, port: number) => {
      const server = https.createServer(
        {
          key: named.key,
          cert: named.cert,
          SNICallback: (servername, done) => {
            servernames.push(servername);
            done(null);
          },
        },
        (req, res) => {
          hosts.push(req.headers.host);
          res.end(host);
        },
      );
      defer(() => new Promise((resolve) => server.close(() => resolve())));
      return new Promise<AddressInfo>((resolve) =>
        server.listen(port, host, () => resolve(server.address() as AddressInfo)),
      );
    };
    const { port } = await listen('127.0.0.1', 0);
    await listen('127.0.0.2', port);
    const gateway = await startTestGateway(
      poolConfig({ targets: [`https://svc.test:${port}`], retries: 0, tls: { ca: ca.certFile } }),
      {},
      { resolveHost: new SvcAnswer().resolve },
    );
    defer(() => gateway.close());
    await targetsBecome(gateway, [`https://127.0.0.1:${port}/`, `https://127.0.0.2:${port}/`]);
    const answers = [];
    for (let i = 0; i < 4; i += 1)
      answers.push(await request(gateway.url, { path: `/pets/${i}`, headers: auth }));
    expect(answers.map(({ status, body }) => [status, body])).toEqual([
      [200, '127.0.0.1'],
      [200, '127.0.0.2'],
      [200, '127.0.0.1'],
      [200, '127.0.0.2'],
    ]);
    expect(new Set(servernames)).toEqual(new Set(['svc.test']));
    expect(new Set(hosts)).toEqual(new Set([`svc.test:${port}`]));
  });
});

describe('the one target of a gRPC API whose host name resolves to several addresses', () => {
  it('spreads the calls over each address', async () => {
    const one = await startGreeterUpstream();
    defer(() => one.close());
    const two = await startGreeterUpstream(undefined, `127.0.0.2:${one.port}`);
    defer(() => two.close());
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9', {
        apis: [{ ...greeterApi(''), upstream: { targets: [`http://svc.test:${one.port}`] } }],
      }),
      {},
      { resolveHost: new SvcAnswer().resolve },
    );
    defer(() => gateway.close());
    await vi.waitFor(async () => {
      const [greeter] = (await (await adminCall(gateway, 'GET', '/upstreams')).json()) as Array<{
        targets: unknown[];
      }>;
      expect(greeter!.targets).toHaveLength(2);
    });
    const client = greeterClient(new URL(gateway.url).host);
    defer(() => client.close());
    const outcomes = [];
    for (let i = 0; i < 6; i += 1) outcomes.push(await client.sayHello(`ann ${i}`, credentials()));
    expect(outcomes.map(({ replies }) => replies[0]?.message)).toEqual(
      [0, 1, 2, 3, 4, 5].map((i) => `Hello ann ${i}`),
    );
    expect([one.calls.length, two.calls.length]).toEqual([3, 3]);
  });
});
