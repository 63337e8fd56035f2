import type { Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import { logIn, mobile as mobileApp, openPage, screenshot, useConsoleBrowser } from '../helpers/browser.js';
import { request } from '../helpers/raw-http.js';
import { FakeClock } from '../helpers/fake-clock.js';
import {
  adminCall,
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  memberUser,
  petsConfig,
  setQuota,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream } from '../helpers/upstream.js';

/**
 * The History view, in a real headless Chromium over a real gateway whose clock the test moves: one
 * uPlot chart per application of its calls per day, the numbers beside it equal to the admin API's
 * lines, the daily limit as a line, and nothing the console's Content-Security-Policy refuses.
 */
const { browser, page, defer } = useConsoleBrowser();

const { id: mobileId, apikey_development: mobileKey } = mobileApp;

/** GET `path` of the pets API with `key`. */
const get = (gateway: TestGateway, key: string, path = '/pets/1') =>
  request(gateway.url, { path, headers: { authorization: basicAuth(key) } });

const day1 = '2026-11-29';
const day2 = '2026-11-30';
/** Ten seconds before midnight UTC: the test's traffic falls on two days. */
const start = Date.parse(`${day2}T00:00:00Z`) - 10_000;

/** The calls each application made per day (admitted/refused) in `gatewayWithTwoDays`. */
const expected = {
  [mobileId]: { '2026-11-28': [0, 0], [day1]: [3, 2], [day2]: [1, 0] },
  project: { '2026-11-28': [0, 0], [day1]: [2, 0], [day2]: [2, 0] },
};

/**
 * Mobile under its own quota of 3 calls per calendar day, which it overruns on day 1 (5 calls: 3
 * admitted, 2 refused) and uses once on day 2; the project under the Application Default of 1,000
 * calls a calendar month, twice a day, on two methods on day 2.
 */
async function gatewayWithTwoDays(): Promise<TestGateway> {
  const upstream = await startUpstream();
  defer(() => upstream.close());
  const clock = new FakeClock(start);
  const applications = [mobileApp];
  const gateway = await startTestGateway(
    petsConfig(`${upstream.url}/pets`, { applications }),
    {},
    {
      clock: clock.now,
      timers: clock,
    },
  );
  defer(() => gateway.close());
  const daily = { messages: 3, per: 1, period: 'day', window: 'calendar' };
  const own = await adminCall(gateway, 'POST', `/applications/${mobileId}/quota`, {
    restrictions: [{ api: '*', method: '*', type: 'throttle', config: daily }],
  });
  expect(own.status).toBe(201);
  const monthly = { messages: 1000, per: 1, period: 'month', window: 'calendar' };
  await setQuota(
    gateway,
    {
      type: 'APPLICATION',
      name: 'Application Default',
      restrictions: [{ api: '*', method: '*', type: 'throttle', config: monthly }],
    },
    applicationDefaultQuotaId,
  );
  const statuses: number[] = [];
  for (let i = 0; i < 5; i += 1) statuses.push((await get(gateway, mobileKey)).status);
  expect(statuses).toEqual([200, 200, 200, 429, 429]);
  await get(gateway, devKey);
  await get(gateway, devKey);
  await clock.advance(11_000);
  expect((await get(gateway, mobileKey)).status).toBe(200);
  await get(gateway, devKey, '/pets/1');
  await get(gateway, devKey, '/pets/');
  // The history is written once a second of the gateway's clock, after the access lines: the clock
  // moves on until the API answers every call.
  await expect
    .poll(async () => {
      await clock.advance(1_000);
      return apiTotals(gateway);
    })
    .toEqual(expected);
  return gateway;
}

/** The admin API's lines of the range, summed per application and day as [admitted, refused]. */
async function apiTotals(gateway: TestGateway): Promise<Record<string, Record<string, number[]>>> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/usage/history?from=2026-11-28&to=${day2}`, {
    headers: { authorization: userAuth(adminUser) },
  });
  const rows = (await res.json()) as Array<{
    date: string;
    application: string;
    admitted: number;
    refused: number;
  }>;
  const totals: Record<string, Record<string, number[]>> = {};
  for (const row of rows) {
    const days = (totals[row.application] ??= { '2026-11-28': [0, 0] });
    const [admitted, refused] = days[row.date] ?? [0, 0];
    days[row.date] = [admitted! + row.admitted, refused! + row.refused];
  }
  return totals;
}

/** Opens the History view on a range and waits for the chart of each application named. */
async function openHistory(browserPage: Page, gateway: TestGateway, applications: string[]): Promise<void> {
  await browserPage.goto(`${gateway.adminUrl}/#/history`);
  await browserPage.waitForSelector('form.history-range');
  await browserPage.$eval('input[name=from]', (input) => ((input as HTMLInputElement).value = '2026-11-28'));
  await browserPage.$eval('input[name=to]', (input, to) => ((input as HTMLInputElement).value = to), day2);
  await browserPage.click('form.history-range button[type=submit]');
  for (const application of applications)
    await browserPage.waitForSelector(
      `article.history[data-application="${application}"] tr[data-date="${day2}"]`,
    );
}

/** The numbers of the table under an application's chart, by day. */
const tableOf = (browserPage: Page, application: string) =>
  browserPage.$$eval(
    `article.history[data-application="${application}"] table.history-table tbody tr`,
    (rows) =>
      Object.fromEntries(
        rows.map((row) => [
          row.getAttribute('data-date'),
          [
            Number(row.querySelector('.admitted')!.textContent),
            Number(row.querySelector('.refused')!.textContent),
          ],
        ]),
      ),
  );

/** Records every Content-Security-Policy violation the page reports, from its first script on. */
async function watchViolations(browserPage: Page): Promise<() => Promise<string[]>> {
  await browserPage.evaluateOnNewDocument(() => {
    const seen: string[] = [];
    (window as unknown as { violations: string[] }).violations = seen;
    document.addEventListener('securitypolicyviolation', (event) =>
      seen.push(`${event.violatedDirective} ${event.blockedURI}`),
    );
  });
  return () => browserPage.evaluate(() => (window as unknown as { violations: string[] }).violations);
}

describe('the History view', () => {
  it("draws a chart per application whose numbers are the API's, with the daily limit as a line", async () => {
    const gateway = await gatewayWithTwoDays();
    const browserPage = await page();
    const violations = await watchViolations(browserPage);
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await openHistory(browserPage, gateway, [mobileId, 'project']);
    await screenshot(browserPage, 'history');

    expect(await tableOf(browserPage, mobileId)).toEqual(expected[mobileId]);
    expect(await tableOf(browserPage, 'project')).toEqual(expected.project);
    // uPlot drew on a canvas of its own size, with a legend row per series.
    const mobile = `article.history[data-application="${mobileId}"]`;
    const canvas = await browserPage.$eval(`${mobile} .uplot canvas`, (element) => ({
      width: (element as HTMLCanvasElement).width,
      height: (element as HTMLCanvasElement).height,
    }));
    expect(canvas.width).toBeGreaterThan(0);
    expect(canvas.height).toBeGreaterThan(0);
    const legend = (article: string) =>
      browserPage.$$eval(`${article} .u-legend .u-series .u-label`, (labels) =>
        labels.map((label) => label.textContent),
      );
    expect(await legend(mobile)).toEqual([
      'Day',
      'Admitted',
      'Refused',
      'Limit: 3 messages per calendar day (UTC)',
    ]);
    expect(await browserPage.$eval(mobile, (element) => element.getAttribute('data-limit'))).toBe('3');
    // The project's month is stated in words, not drawn as a daily line.
    const project = 'article.history[data-application="project"]';
    expect(await legend(project)).toEqual(['Day', 'Admitted', 'Refused']);
    expect(await browserPage.$eval(project, (element) => element.hasAttribute('data-limit'))).toBe(false);
    expect(
      await browserPage.$$eval(`${project} ul.limits-stated li`, (items) =>
        items.map((item) => item.textContent),
      ),
    ).toEqual([
      '1,000 messages per calendar month (UTC) on every API (not drawn: its window is not one day)',
    ]);
    expect(await violations()).toEqual([]);
  });

  it("shows a member each application's chart through its own history", async () => {
    const gateway = await gatewayWithTwoDays();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, memberUser);
    await openHistory(browserPage, gateway, [mobileId, 'project']);
    expect(await tableOf(browserPage, mobileId)).toEqual(expected[mobileId]);
    expect(await tableOf(browserPage, 'project')).toEqual(expected.project);
  });

  it("says so when the range holds no call, and shows the API's message for a range it refuses", async () => {
    const gateway = await gatewayWithTwoDays();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/history`);
    await browserPage.waitForSelector('form.history-range');
    const showRange = async (from: string, to: string) => {
      await browserPage.$eval(
        'input[name=from]',
        (input, value) => ((input as HTMLInputElement).value = value),
        from,
      );
      await browserPage.$eval(
        'input[name=to]',
        (input, value) => ((input as HTMLInputElement).value = value),
        to,
      );
      await browserPage.click('form.history-range button[type=submit]');
    };
    await showRange('2026-10-01', '2026-10-31');
    await browserPage.waitForSelector('.history-list p.empty');
    expect(await browserPage.$eval('.history-list p.empty', (element) => element.textContent)).toBe(
      'No calls counted from 2026-10-01 to 2026-10-31 on every API.',
    );
    expect(await browserPage.$('article.history canvas')).toBeNull();
    await showRange(day2, day1);
    await browserPage.waitForSelector('.history-list p.error');
    expect(await browserPage.$eval('.history-list p.error', (element) => element.textContent)).toContain(
      `from: ${day2} is later than to (${day1})`,
    );
  });

  it('would see a violation: the console refuses a style attribute set as markup', async () => {
    const gateway = await gatewayWithTwoDays();
    // A page of its own: the suite's pages fail on any violation, and this one makes one on purpose.
    const { page: probe, problems } = await openPage(browser());
    defer(() => probe.browserContext().close());
    const violations = await watchViolations(probe);
    await logIn(probe, gateway.adminUrl, adminUser);
    await openHistory(probe, gateway, [mobileId]);
    await probe.evaluate(() => document.body.setAttribute('style', 'color: red'));
    await expect.poll(violations).toEqual([expect.stringMatching(/^style-src/)]);
    expect(problems).toEqual([expect.stringContaining('Content Security Policy')]);
  });
});
