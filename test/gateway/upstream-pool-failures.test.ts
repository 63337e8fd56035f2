import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { getMany, served, startPoolGateway } from '../helpers/pool-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { accessLines, adminUser, userAuth, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const defer = cleanupAfterEach();

const gatewayWith = (upstream: Record<string, unknown>, clock?: FakeClock): Promise<TestGateway> =>
  startPoolGateway(defer, upstream, clock);

/**
 * A target that answers `/healthz` as `healthy()` says (200 or 500), and everything else with
 * `handler`, or with `status` and a body.
 */
async function target(
  status = 200,
  healthy: () => boolean = () => true,
  handler?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestUpstream> {
  const upstream = await startUpstream((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(healthy() ? 200 : 500).end();
      return;
    }
    if (handler) handler(req, res);
    else res.writeHead(status, { 'content-type': 'text/plain' }).end(`answered ${status}`);
  });
  defer(() => upstream.close());
  return upstream;
}

const post = (gateway: TestGateway) =>
  request(gateway.url, {
    method: 'POST',
    path: '/pets',
    headers: { ...auth, 'content-type': 'application/json' },
    body: '{"name":"rex"}',
  });

/** The targets named by the log lines `msg`, in order. */
const loggedTargets = (gateway: TestGateway, msg: string) =>
  gateway.logs.filter((line) => line.msg === msg).map(({ target: name }) => name);

const ejected = 'upstream target ejected: its exchanges failed in a row';

/** Each target's `ejected` and `ejections` as the admin port's `/upstreams` and `/metrics` say them. */
async function ejections(gateway: TestGateway) {
  const headers = { authorization: userAuth(adminUser) };
  const answer = await fetch(`${gateway.adminUrl}/api/portal/v1.3/upstreams`, { headers });
  const [pets] = (await answer.json()) as Array<{ targets: Array<{ ejected: boolean; ejections: number }> }>;
  const metrics = await (await fetch(`${gateway.adminUrl}/metrics`, { headers })).text();
  const series = (name: string) =>
    metrics
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`))
      .map((line) => Number(line.split(' ').at(-1)));
  return {
    listed: pets!.targets.map(({ ejected, ejections }) => [ejected, ejections]),
    metrics: [
      series('quotagate_upstream_target_ejected'),
      series('quotagate_upstream_target_ejections_total'),
    ],
  };
}

describe('passive outlier detection of a pool', () => {
  it('ejects a target answering 503 after consecutiveFailures, sends it nothing for ejectTime, then again', async () => {
    const clock = new FakeClock();
    const [sick, well] = [await target(503), await target()];
    const outlierDetection = { consecutiveFailures: 3, ejectTime: 30_000 };
    const gateway = await gatewayWith({ targets: [sick.url, well.url], outlierDetection }, clock);
    // Round-robin: the 1st, 3rd and 5th go to the sick target (each sent on to the other), which is then out.
    expect(new Set(await getMany(gateway, 5))).toEqual(new Set([200]));
    expect(loggedTargets(gateway, ejected)).toEqual([sick.url]);
    expect(served(sick)).toBe(3);
    expect(await ejections(gateway)).toEqual({
      listed: [
        [true, 1],
        [false, 0],
      ],
      metrics: [
        [1, 0],
        [1, 0],
      ],
    });
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect(served(sick)).toBe(3);
    expect(served(well)).toBe(15);

    await clock.advance(outlierDetection.ejectTime - 1);
    await getMany(gateway, 4);
    expect(served(sick)).toBe(3);
    await clock.advance(1);
    expect(loggedTargets(gateway, 'upstream target back: its ejection ended')).toEqual([sick.url]);
    expect((await ejections(gateway)).listed).toEqual([
      [false, 1],
      [false, 0],
    ]);
    expect(new Set(await getMany(gateway, 4))).toEqual(new Set([200]));
    expect(served(sick)).toBe(5);
  });

  it('ejects a killed target after refused connections: the exchanges that follow go straight to another', async () => {
    const [killed, well] = [await target(), await target()];
    await killed.close();
    const gateway = await gatewayWith({
      targets: [killed.url, well.url],
      outlierDetection: { consecutiveFailures: 2, ejectTime: 30_000 },
    });
    expect(new Set(await getMany(gateway, 10))).toEqual(new Set([200]));
    expect(loggedTargets(gateway, ejected)).toEqual([killed.url]);
    await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(10));
    // The 1st and the 3rd were refused, and sent on; none after them tried the killed target.
    expect(accessLines(gateway).map(({ tried }) => tried)).toEqual([2, 1, 2, 1, 1, 1, 1, 1, 1, 1]);
  });

  it('never ejects more than half of the targets at once', async () => {
    const fleet = [await target(503), await target(503), await target(503), await target(503)];
    const gateway = await gatewayWith({
      targets: fleet.map(({ url }) => url),
      outlierDetection: { consecutiveFailures: 1, ejectTime: 30_000 },
      retries: 0,
    });
    expect(new Set(await getMany(gateway, 8))).toEqual(new Set([503]));
    const out = loggedTargets(gateway, ejected);
    expect(out).toHaveLength(2);
    const before = fleet.map(served);
    expect(new Set(await getMany(gateway, 8))).toEqual(new Set([503]));
    for (const [i, upstream] of fleet.entries()) {
      if (out.includes(upstream.url)) expect(served(upstream)).toBe(before[i]);
      else expect(served(upstream)).toBe(before[i]! + 4);
    }
  });

  it('still sends to every target when each is out, by its health checks or by ejection', async () => {
    const clock = new FakeClock();
    const healthCheck = {
      path: '/healthz',
      interval: 1_000,
      timeout: 500,
      unhealthyAfter: 2,
      healthyAfter: 2,
    };
    const [checkedOut, failing] = [await target(200, () => false), await target(503)];
    const gateway = await gatewayWith(
      {
        targets: [checkedOut.url, failing.url],
        healthCheck,
        outlierDetection: { consecutiveFailures: 1, ejectTime: 30_000 },
        retries: 0,
      },
      clock,
    );
    await clock.advance(healthCheck.interval);
    await vi.waitFor(() =>
      expect(gateway.logs.some(({ msg }) => msg === 'upstream target out: its health checks fail')).toBe(
        true,
      ),
    );
    expect(await getMany(gateway, 1)).toEqual([503]);
    expect(loggedTargets(gateway, ejected)).toEqual([failing.url]);
    await getMany(gateway, 4);
    expect([served(checkedOut), served(failing)]).toEqual([2, 3]);
  });
});

describe('retries of a pool on a gateway error', () => {
  it.each([502, 503, 504])(
    'sends a GET answered %i to another target: the client sees 200',
    async (status) => {
      const [failing, well] = [await target(status), await target()];
      const gateway = await gatewayWith({ targets: [failing.url, well.url] });
      const res = await request(gateway.url, { path: '/pets/1', headers: auth });
      expect(res).toMatchObject({ status: 200, body: 'answered 200' });
      expect([served(failing), served(well)]).toEqual([1, 1]);
      await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(1));
      expect(accessLines(gateway)[0]).toMatchObject({ status: 200, target: well.url, tried: 2 });
    },
  );

  it('never sends a POST answered 503 again: the target counts it once', async () => {
    const [failing, well] = [await target(503), await target()];
    const gateway = await gatewayWith({ targets: [failing.url, well.url] });
    const res = await post(gateway);
    expect(res).toMatchObject({ status: 503, body: 'answered 503' });
    expect(failing.requests.filter(({ method }) => method === 'POST')).toHaveLength(1);
    expect(served(well)).toBe(0);
  });

  it('never sends a POST without a body answered 503 again', async () => {
    const [failing, well] = [await target(503), await target()];
    const gateway = await gatewayWith({ targets: [failing.url, well.url] });
    const res = await request(gateway.url, {
      method: 'POST',
      path: '/pets',
      headers: { ...auth, 'content-length': '0' },
    });
    expect(res.status).toBe(503);
    expect([served(failing), served(well)]).toEqual([1, 0]);
  });

  it('relays a 500 as it is: only a gateway error is sent elsewhere', async () => {
    const [failing, well] = [await target(500), await target()];
    const gateway = await gatewayWith({ targets: [failing.url, well.url] });
    expect(await getMany(gateway, 1)).toEqual([500]);
    expect(served(well)).toBe(0);
  });

  it('relays the last target tried when each answers 503', async () => {
    const [a, b] = [await target(503), await target(503)];
    const gateway = await gatewayWith({ targets: [a.url, b.url], retries: 5 });
    expect(await getMany(gateway, 1)).toEqual([503]);
    expect([served(a), served(b)]).toEqual([1, 1]);
  });

  it('never sends an answer elsewhere once the client has a byte of it', async () => {
    const cutting = await target(200, undefined, (req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial', () => setImmediate(() => req.socket.destroy()));
    });
    const well = await target();
    const gateway = await gatewayWith({ targets: [cutting.url, well.url] });
    const outcome = await request(gateway.url, { path: '/pets/1', headers: auth }).catch(
      (error: Error) => error,
    );
    expect(outcome).toBeInstanceOf(Error);
    expect([served(cutting), served(well)]).toEqual([1, 0]);
  });

  it('sends a fleet answering 503 no more than its retry budget on top of its load', async () => {
    const held: ServerResponse[] = [];
    const hold = (_req: IncomingMessage, res: ServerResponse) => held.push(res);
    const [a, b] = [await target(200, undefined, hold), await target(200, undefined, hold)];
    const gateway = await gatewayWith({ targets: [a.url, b.url] });
    // More exchanges at once than the budget's reserve of 100 retries.
    const clients = 150;
    let answered = 0;
    const requests = Array.from({ length: clients }, (_, i) =>
      request(gateway.url, { path: `/pets/${i}`, headers: auth }).then((res) => {
        answered += 1;
        return res.status;
      }),
    );
    const settled = { timeout: 20_000 };
    await vi.waitFor(() => expect(held).toHaveLength(clients), settled);
    for (const res of held.splice(0)) res.writeHead(503).end('down');
    // Each client is either answered the 503, or waits for the retry its exchange was given.
    await vi.waitFor(() => expect(answered + held.length).toBe(clients), settled);
    const retries = held.length;
    // Linkerd's budget: the reserve of 100 over 10 s, and 20% of the 150 exchanges sent; without it,
    // every exchange would have had its retry.
    expect(retries).toBe(100 + clients * 0.2);
    for (const res of held.splice(0)) res.writeHead(503).end('down');
    expect(new Set(await Promise.all(requests))).toEqual(new Set([503]));
    expect(served(a) + served(b)).toBe(clients + retries);
  });
});
