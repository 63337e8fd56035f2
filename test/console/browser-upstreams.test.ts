import { describe, expect, it } from 'vitest';
import { logIn, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import {
  adminUser,
  memberUser,
  petsConfig,
  startGatewayOverUpstream,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * The API documentation tab shows each API's upstream targets and their state, in a real Chromium over
 * a real gateway: a pool with a target that answers and one that refuses (its first health check takes
 * it out), beside an API of one URL.
 */
const { defer, page } = useConsoleBrowser();

const ordersApi = (upstream: string) => ({
  id: '7d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09',
  name: 'Orders',
  basePath: '/orders',
  upstream,
  methods: [{ id: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d', name: 'listOrders', verb: 'GET', path: '/' }],
});

/** A gateway whose Pet Store is a pool of the test's upstream and a target that refuses, and Orders one URL. */
async function startWithPool(): Promise<{ gateway: TestGateway; good: string; refused: string }> {
  const closed = await startUpstream();
  const refused = closed.url;
  await closed.close();
  let good = '';
  const started = await startGatewayOverUpstream((url) => {
    good = `${url}/pets`;
    const [pets] = petsConfig(good).apis as Array<Record<string, unknown>>;
    const oneCheck = { path: '/', interval: 3_600_000, timeout: 5_000, unhealthyAfter: 1, healthyAfter: 1 };
    return petsConfig(good, {
      apis: [
        {
          ...pets,
          upstream: { targets: [good, `${refused}/pets`], healthCheck: oneCheck, balance: 'least-requests' },
        },
        ordersApi(url),
      ],
    });
  });
  defer(() => started.close());
  await expect
    .poll(() =>
      started.gateway.logs.some((line) => line.msg === 'upstream target out: its health checks fail'),
    )
    .toBe(true);
  return { gateway: started.gateway, good, refused: `${refused}/pets` };
}

describe('the targets on the API documentation tab', () => {
  it.each([adminUser, memberUser])(
    "shows each API's targets, their weight and state, to $role",
    async (user) => {
      const { gateway, good, refused } = await startWithPool();
      const browserPage = await page();
      await logIn(browserPage, gateway.adminUrl, user);
      await browserPage.goto(`${gateway.adminUrl}/#/docs`);
      const summary = await waitForText(browserPage, '.targets p', 'targets healthy');
      expect(summary).toBe('1 of 2 targets healthy, least-requests');
      const rows = await browserPage.$$eval('.targets tr[data-target]', (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim())),
      );
      expect(rows).toEqual([
        [good, '1', 'healthy', '0'],
        [refused, '1', 'out', '0'],
        [expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), '1', 'healthy', '0'],
      ]);
      expect(await browserPage.$$eval('.targets p', (ps) => ps.map((p) => p.textContent))).toEqual([
        '1 of 2 targets healthy, least-requests',
        'One upstream URL',
      ]);
    },
  );

  it('names the host each address of a target was resolved from', async () => {
    const upstream = await startUpstream();
    defer(() => upstream.close());
    const { port } = new URL(upstream.url);
    const named = `http://svc.test:${port}/pets`;
    const config = petsConfig(named);
    const [pets] = config.apis as Array<Record<string, unknown>>;
    pets!.upstream = { targets: [named] };
    const gateway = await startTestGateway(config, {}, { resolveHost: () => Promise.resolve(['127.0.0.1']) });
    defer(() => gateway.close());
    // The start does not wait for the first resolution: the page is opened once it is known.
    const hostOfFirstTarget = async () => {
      const answer = await fetch(`${gateway.adminUrl}/api/portal/v1.3/upstreams`, {
        headers: { authorization: userAuth(adminUser) },
      });
      const [api] = (await answer.json()) as Array<{ targets: Array<{ host: string | null }> }>;
      return api!.targets[0]!.host;
    };
    await expect.poll(hostOfFirstTarget).toBe(`svc.test:${port}`);
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/docs`);
    await waitForText(browserPage, '.targets p', 'targets healthy');
    const rows = await browserPage.$$eval('.targets tr[data-target]', (trs) =>
      trs.map((tr) => tr.querySelector('td')?.textContent?.trim()),
    );
    expect(rows).toEqual([`http://127.0.0.1:${port}/pets resolved from svc.test:${port}`]);
  });
});
