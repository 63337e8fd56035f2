import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCliGateway, type CliGateway } from '../helpers/cli-gateway.js';
import { promtool, runPromtool, samplesOf, sumOf, withEverySampled } from '../helpers/gateway-metrics.js';
import { auth } from '../helpers/proxy-parts.js';
import { request } from '../helpers/raw-http.js';
import { adminUser, petsConfig, userAuth } from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

/** An API of the test config at `basePath` with `upstream`, and one GET method. */
const api = (id: string, name: string, basePath: string, upstream: unknown) => ({
  id,
  name,
  basePath,
  upstream,
  methods: [{ id: `${id.slice(0, -12)}000000000001`, name: `${name} call`, verb: 'GET', path: '/{id}' }],
});

/** Checked once, at the start: a target that answers 500 is out at once, and stays out for the test. */
const oneCheck = {
  path: '/healthz',
  interval: 3_600_000,
  timeout: 5_000,
  unhealthyAfter: 1,
  healthyAfter: 1,
};

/**
 * The target metrics, `/upstreams` and `/readyz` of `gateway start`, whose data planes run apart from its
 * admin listener (a thread with `workers: 1`, two processes with `workers: 2`): a pool whose health
 * checks find one target out (Pet Store), a pool with a target that refuses connections (Orders), a pool
 * whose only target is out (Status), and an API of one URL (Legacy).
 */
describe.each([1, 2])('the upstream targets of gateway start with workers: %i', (workers) => {
  const cleanups: Array<() => Promise<void> | void> = [];
  let gateway: CliGateway;
  let good: TestUpstream;
  let sick: TestUpstream;
  let refusedUrl: string;
  let text: string;
  const sent = 12;

  beforeAll(async () => {
    good = await startUpstream((_req, res) => res.end('ok'));
    sick = await startUpstream((req, res) => res.writeHead(req.url === '/healthz' ? 500 : 200).end('ok'));
    const refused = await startUpstream((_req, res) => res.end());
    refusedUrl = refused.url;
    await refused.close();
    cleanups.push(
      () => good.close(),
      () => sick.close(),
    );
    const [pets] = petsConfig(good.url).apis as Array<Record<string, unknown>>;
    const config = petsConfig(good.url, {
      workers,
      apis: [
        { ...pets, upstream: { targets: [good.url, sick.url], healthCheck: oneCheck } },
        api('3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a98', 'Orders', '/orders', { targets: [good.url, refusedUrl] }),
        api('4d3c2b1a-0f9e-4d8c-8b7a-6f5e4d3c2b1a', 'Status', '/status', {
          targets: [sick.url],
          healthCheck: oneCheck,
        }),
        api('5e4d3c2b-1a0f-4e9d-8c7b-7a6f5e4d3c2b', 'Legacy', '/legacy', good.url),
      ],
    });
    gateway = await startCliGateway(config, (cleanup) => cleanups.push(cleanup));
    // Each data plane checks the targets itself, from its start.
    const outLines = () =>
      gateway.logs().filter((line) => line.msg === 'upstream target out: its health checks fail').length;
    await gateway.until(() => outLines() === 2 * workers);
    for (let i = 0; i < sent; i += 1) {
      for (const path of [`/pets/${i}`, `/orders/${i}`, `/legacy/${i}`])
        expect((await request(gateway.url, { path, headers: auth })).status, path).toBe(200);
    }
    text = await gateway.metricsText();
  }, 60_000);

  afterAll(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const target = (name: string, url: string) => ({ api: name, target: url });

  it('says which target the health checks find out, for pool APIs only', () => {
    expect(sumOf(text, 'quotagate_upstream_target_healthy', target('Pet Store', good.url))).toBe(1);
    expect(sumOf(text, 'quotagate_upstream_target_healthy', target('Pet Store', sick.url))).toBe(0);
    expect(sumOf(text, 'quotagate_upstream_target_healthy', target('Status', sick.url))).toBe(0);
    expect(sumOf(text, 'quotagate_upstream_target_healthy', target('Orders', refusedUrl))).toBe(1);
    const apis = new Set(
      samplesOf(text)
        .filter(({ name }) => name.startsWith('quotagate_upstream_target_'))
        .map(({ labels }) => labels.api),
    );
    expect(apis).toEqual(new Set(['Pet Store', 'Orders', 'Status']));
  });

  it('counts the requests, failures and retries of each target, whichever process sent them', () => {
    const count = (family: string, name: string, url: string) =>
      sumOf(text, `quotagate_upstream_target_${family}_total`, target(name, url));
    expect(count('requests', 'Pet Store', good.url)).toBe(sent);
    expect(count('requests', 'Pet Store', sick.url)).toBe(0);
    const refusedTries = count('requests', 'Orders', refusedUrl);
    expect(refusedTries).toBeGreaterThan(0);
    expect(count('failures', 'Orders', refusedUrl)).toBe(refusedTries);
    expect(count('retries', 'Orders', good.url)).toBe(refusedTries);
    expect(count('requests', 'Orders', good.url)).toBe(sent);
    expect(count('failures', 'Orders', good.url)).toBe(0);
    expect(sumOf(text, 'quotagate_upstream_target_in_flight')).toBe(0);
  });

  it('lists the targets on the admin port as every data plane knows them', async () => {
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/upstreams`, {
      headers: { authorization: userAuth(adminUser) },
    });
    expect(res.status).toBe(200);
    const upstreams = (await res.json()) as Array<{
      name: string;
      targets: Array<{ url: string; healthy: boolean; requests: number }>;
    }>;
    const states = Object.fromEntries(
      upstreams.map(({ name, targets }) => [
        name,
        targets.map(({ url, healthy, requests }) => [url, healthy, requests]),
      ]),
    );
    expect(states['Pet Store']).toEqual([
      [good.url, true, sent],
      [sick.url, false, 0],
    ]);
    expect(states.Status).toEqual([[sick.url, false, 0]]);
    expect(states.Legacy).toEqual([[good.url, true, 0]]);
  });

  it('is not ready while every target of a pool API is out', async () => {
    const res = await fetch(`${gateway.adminUrl}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'not ready', checks: { upstreams: 'unreachable' } });
  });

  it.skipIf(!promtool)('passes promtool check metrics', async () => {
    expect(await runPromtool(['check', 'metrics'], withEverySampled(text))).toEqual({
      exitCode: 0,
      output: '',
    });
  });
});
