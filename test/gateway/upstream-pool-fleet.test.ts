import { describe, expect, it, vi } from 'vitest';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { get, setSystemQuotaOnFleet, startFleetOfTwo, tooMany } from '../helpers/enforcement-gateways.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { poolConfig, served } from '../helpers/pool-gateways.js';
import { accessLines, startTestGateway, throttle, type TestGateway } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * Two gateways in front of the same pool of targets. Each checks the targets' health itself, and marks a
 * target out on what its own checks found (health is per gateway, in its memory, whatever the store);
 * the quotas still count the requests of both (fleet-wide on Redis), however the pool spreads them.
 */
const defer = cleanupAfterEach();
const healthCheck = { path: '/healthz', interval: 1_000, timeout: 500, unhealthyAfter: 2, healthyAfter: 2 };

/** A target that answers `/healthz` as `healthy()` says (200 or 500) and everything else with 200. */
async function target(healthy: () => boolean = () => true): Promise<TestUpstream> {
  const upstream = await startUpstream((req, res) => {
    if (req.url === '/healthz') res.writeHead(healthy() ? 200 : 500).end();
    else res.end('ok');
  });
  defer(() => upstream.close());
  return upstream;
}

/** Two gateways of `upstream` (a pool), each on its own clock: on one Redis, or each with its memory store. */
async function twoGateways(
  store: 'memory' | 'redis',
  upstream: Record<string, unknown>,
  clocks: [FakeClock, FakeClock],
): Promise<[TestGateway, TestGateway]> {
  const config = poolConfig(upstream);
  if (store === 'redis')
    return startFleetOfTwo(
      defer,
      { apis: config.apis },
      { clocks: [{ timers: clocks[0] }, { timers: clocks[1] }] },
    );
  const gateways = [];
  for (const clock of clocks) {
    const gateway = await startTestGateway(config, {}, { timers: clock });
    defer(() => gateway.close());
    gateways.push(gateway);
  }
  return gateways as [TestGateway, TestGateway];
}

/** The targets that answered `count` GETs sent one after another through `gateway`, as its access lines name them. */
async function answeredBy(gateway: TestGateway, count: number): Promise<string[]> {
  const before = accessLines(gateway).length;
  for (let i = 0; i < count; i += 1) expect((await get(gateway, undefined, `/pets/${i}`)).status).toBe(200);
  await vi.waitFor(() => expect(accessLines(gateway)).toHaveLength(before + count));
  return accessLines(gateway)
    .slice(before)
    .map(({ target: name }) => String(name));
}

/** Waits until `gateway` logged `msg` about the target at `url`. */
const logged = (gateway: TestGateway, msg: string, url: string) =>
  vi.waitFor(() => expect(gateway.logs.some((line) => line.msg === msg && line.target === url)).toBe(true));

const out = 'upstream target out: its health checks fail';
const back = 'upstream target back: its health checks pass';
const ejected = 'upstream target ejected: its exchanges failed in a row';

describe.each(['memory', 'redis'] as const)('two gateways in front of one pool, on the %s store', (store) => {
  it('each takes a target out on its own checks, and brings it back on them', async () => {
    let sick = true;
    const [flaky, well] = [await target(() => !sick), await target()];
    const clocks: [FakeClock, FakeClock] = [new FakeClock(), new FakeClock()];
    const [a, b] = await twoGateways(store, { targets: [flaky.url, well.url], healthCheck }, clocks);
    // a's second check fails: the target is out for a. b has checked once: in for b.
    await clocks[0].advance(healthCheck.interval);
    await logged(a, out, flaky.url);
    expect(new Set(await answeredBy(a, 6))).toEqual(new Set([well.url]));
    expect((await answeredBy(b, 6)).filter((name) => name === flaky.url)).toHaveLength(3);
    expect(b.logs.some(({ msg }) => msg === out)).toBe(false);

    // b's own second check takes it out for b too.
    await clocks[1].advance(healthCheck.interval);
    await logged(b, out, flaky.url);
    expect(new Set(await answeredBy(b, 6))).toEqual(new Set([well.url]));

    // Well again: a's two good checks bring it back for a; b, whose clock has not moved, keeps it out.
    sick = false;
    await clocks[0].advance(healthCheck.interval);
    await vi.waitFor(() => expect(flaky.requests.filter(({ url }) => url === '/healthz')).toHaveLength(5));
    await clocks[0].advance(healthCheck.interval);
    await logged(a, back, flaky.url);
    expect((await answeredBy(a, 6)).filter((name) => name === flaky.url)).toHaveLength(3);
    expect(new Set(await answeredBy(b, 6))).toEqual(new Set([well.url]));
  });

  it('each ejects a target on the failures of its own exchanges', async () => {
    const sick = await startUpstream((_req, res) => res.writeHead(503).end('down'));
    defer(() => sick.close());
    const well = await target();
    const clocks: [FakeClock, FakeClock] = [new FakeClock(), new FakeClock()];
    const outlierDetection = { consecutiveFailures: 2, ejectTime: 30_000 };
    const [a, b] = await twoGateways(store, { targets: [sick.url, well.url], outlierDetection }, clocks);
    // Round-robin: a's 1st and 3rd go to the sick target first (and on to the other), then it is out for a.
    expect(new Set(await answeredBy(a, 6))).toEqual(new Set([well.url]));
    expect(a.logs.filter(({ msg }) => msg === ejected).map(({ target: name }) => name)).toEqual([sick.url]);
    expect(sick.requests).toHaveLength(2);
    // b has seen no failure of its own: it still tries the sick target first, every other time.
    expect(new Set(await answeredBy(b, 2))).toEqual(new Set([well.url]));
    expect(sick.requests).toHaveLength(3);
    expect(b.logs.some(({ msg }) => msg === ejected)).toBe(false);
  });
});

describe('a fleet of two gateways on Redis in front of one pool', () => {
  it('passes exactly the throttle in total across both, however the pool spreads them', async () => {
    const [x, y] = [await target(), await target()];
    const [a, b] = await startFleetOfTwo(defer, {
      apis: poolConfig({ targets: [x.url, { url: y.url, weight: 2 }] }).apis,
    });
    await setSystemQuotaOnFleet(a, b, throttle(7, 1, 'hour'));
    const answers = [];
    for (let i = 0; i < 10; i += 1) answers.push(await get(a), await get(b));
    expect(answers.filter(({ status }) => status === 200)).toHaveLength(7);
    const refused = answers.filter(({ status }) => status === 429);
    expect(refused).toHaveLength(13);
    expect(new Set(refused.map(({ body }) => body))).toEqual(new Set([tooMany]));
    // Only what passed reached the pool, both gateways' sent to its targets.
    expect(served(x) + served(y)).toBe(7);
    expect(served(x)).toBeGreaterThan(0);
    expect(served(y)).toBeGreaterThan(0);
  });
});
